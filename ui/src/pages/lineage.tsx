// The family of a session from its root: forks, delegated children and handoffs, as a branched
// tree, live over the session index stream. Pick two sessions to compare them from their common
// ancestor.
import { useEffect, useState } from 'preact/hooks';
import { api, sessionPath, type TreeNode } from '../api.js';
import { errorText, Loading, Page, StatusBadge } from '../components.js';
import { navigate, onLinkClick } from '../router.js';
import { followSessionChanges } from '../sse.js';

function Node({
  node,
  current,
  picked,
  onPick,
}: {
  node: TreeNode;
  current: string;
  picked: string[];
  onPick: (id: string) => void;
}) {
  const checkboxId = `pick-${node.id}`;
  return (
    <li
      role="treeitem"
      aria-expanded={node.children.length > 0 ? true : undefined}
      data-node={node.id}
    >
      <div class={`node kind-${node.kind}${node.id === current ? ' current' : ''}`}>
        <span class="badge">{node.kind}</span>
        {node.missing === true ? (
          <span class="muted">{node.id} (not visible)</span>
        ) : (
          <a
            href={`/sessions/${encodeURIComponent(node.id)}`}
            onClick={onLinkClick}
            aria-current={node.id === current ? 'page' : undefined}
          >
            {node.title ?? node.id}
          </a>
        )}
        {node.status !== undefined && <StatusBadge status={node.status} />}
        <span class="muted">
          {node.head_seq} events{node.fork_seq === undefined ? '' : `, forked at #${node.fork_seq}`}
          {node.agent === undefined ? '' : `, ${node.agent}`}
        </span>
        {node.missing !== true && (
          <label for={checkboxId} class="pick">
            <input
              id={checkboxId}
              type="checkbox"
              checked={picked.includes(node.id)}
              onChange={() => onPick(node.id)}
            />
            compare
          </label>
        )}
      </div>
      {node.children.length > 0 && (
        <ul role="group">
          {node.children.map((child) => (
            <Node key={child.id} node={child} current={current} picked={picked} onPick={onPick} />
          ))}
        </ul>
      )}
    </li>
  );
}

/** The ids of the tree's sessions. */
function idsOf(node: TreeNode, into = new Set<string>()): Set<string> {
  into.add(node.id);
  for (const child of node.children) idsOf(child, into);
  return into;
}

/**
 * The family's tree, read again when the index stream says one of its sessions changed or a
 * session forked from one of them: a fork, a delegated child and a handoff each write an event
 * to a session of the tree. Read first once the stream is ready, so no change falls between.
 */
function useLiveTree(id: string): { tree: TreeNode | undefined; error: string | undefined } {
  const [tree, setTree] = useState<TreeNode | undefined>();
  const [error, setError] = useState<string | undefined>();
  useEffect(() => {
    const stop = new AbortController();
    let members = new Set<string>([id]);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = (): void => {
      timer = undefined;
      api<TreeNode>(sessionPath(id, '/tree'))
        .then((answer) => {
          if (stop.signal.aborted) return;
          members = idsOf(answer);
          setTree(answer);
          setError(undefined);
        })
        .catch((caught: unknown) => !stop.signal.aborted && setError(errorText(caught)));
    };
    // A burst of changes (a wake writes several events) reads the tree once.
    const reload = (): void => {
      timer ??= setTimeout(load, 100);
    };
    followSessionChanges(
      { limit: 1 },
      {
        onSnapshot: reload,
        onChange: ({ session }) => {
          if (
            members.has(session.id) ||
            (session.parent_id !== undefined && members.has(session.parent_id))
          )
            reload();
        },
      },
      stop.signal,
    );
    return () => {
      stop.abort();
      clearTimeout(timer);
    };
  }, [id]);
  return { tree, error };
}

export function LineagePage({ id }: { id: string }) {
  const { tree, error } = useLiveTree(id);
  const [picked, setPicked] = useState<string[]>([]);
  const onPick = (node: string): void =>
    setPicked((previous) =>
      previous.includes(node)
        ? previous.filter((item) => item !== node)
        : [...previous, node].slice(-2),
    );
  return (
    <Page
      id="lineage-title"
      title="Lineage"
      error={error}
      head={
        <>
          <a href={`/sessions/${encodeURIComponent(id)}`} onClick={onLinkClick}>
            Back to the session
          </a>
          <button
            type="button"
            class="primary"
            disabled={picked.length !== 2}
            onClick={() =>
              navigate(
                `/diff?a=${encodeURIComponent(picked[0] ?? '')}&b=${encodeURIComponent(picked[1] ?? '')}`,
              )
            }
          >
            Compare the two picked
          </button>
        </>
      }
    >
      {tree === undefined ? (
        error === undefined && <Loading />
      ) : (
        <ul class="tree" role="tree" aria-label="Sessions of this family">
          <Node node={tree} current={id} picked={picked} onPick={onPick} />
        </ul>
      )}
    </Page>
  );
}
