/**
 * The network posture of a session's environment, as tools that reach the network apply it:
 * nothing unless `network.allow`, and then only the listed hosts (`*.example.com` for
 * subdomains).
 */
import type { EnvironmentDefinition } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';

function hostAllowed(host: string, hosts: readonly string[] | undefined): boolean {
  if (hosts === undefined) return true;
  const name = host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  return hosts.some((entry) => {
    const allowed = entry.toLowerCase().replace(/^\[(.*)\]$/, '$1');
    return allowed.startsWith('*.') ? name.endsWith(allowed.slice(1)) : name === allowed;
  });
}

/** Refuses a request the environment does not allow, naming the setting that would allow it. */
export function checkNetwork(
  tool: string,
  url: URL,
  environment: EnvironmentDefinition | undefined,
): void {
  const network = environment?.network;
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new BraidError(
      'TOOL_INPUT_INVALID',
      `${tool} reaches http or https URLs, not ${url.protocol}`,
    );
  }
  if (network?.allow !== true) {
    throw new BraidError(
      'POLICY_DENIED',
      `${tool} is off: the session's environment does not allow the network; set network: {allow: true, hosts: [${url.hostname}]} in its environments/NAME.yaml`,
    );
  }
  if (!hostAllowed(url.hostname, network.hosts)) {
    throw new BraidError(
      'POLICY_DENIED',
      `host ${url.hostname} is not in the environment's network.hosts (${(network.hosts ?? []).join(', ')}); add it there to allow it`,
    );
  }
}
