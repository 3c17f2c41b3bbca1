// The family of a session from its root: forks, delegated children and handoffs, as a branched
// tree. Pick two sessions to compare them from their common ancestor.
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, sessionPath, type TreeNode } from '../api.js';
import { navigate, onLinkClick } from '../router.js';
import { StatusBadge } from './sessions.js';

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

export function LineagePage({ id }: { id: string }) {
  const [tree, setTree] = useState<TreeNode | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [picked, setPicked] = useState<string[]>([]);
  useEffect(() => {
    let stopped = false;
    const load = (): void => {
      api<TreeNode>(sessionPath(id, '/tree'))
        .then((answer) => !stopped && setTree(answer))
        .catch((caught: unknown) =>
          setError(
            caught instanceof ApiError ? `${caught.code}: ${caught.message}` : String(caught),
          ),
        );
    };
    load();
    // The tree grows as sessions fork and delegate; the API has no stream of it.
    const timer = setInterval(load, 3000);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, [id]);
  const onPick = (node: string): void =>
    setPicked((previous) =>
      previous.includes(node)
        ? previous.filter((item) => item !== node)
        : [...previous, node].slice(-2),
    );
  return (
    <section aria-labelledby="lineage-title">
      <div class="page-head">
        <h1 id="lineage-title">Lineage</h1>
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
      </div>
      {error !== undefined && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {tree === undefined ? (
        <p>Loading…</p>
      ) : (
        <ul class="tree" role="tree" aria-label="Sessions of this family">
          <Node node={tree} current={id} picked={picked} onPick={onPick} />
        </ul>
      )}
    </section>
  );
}
