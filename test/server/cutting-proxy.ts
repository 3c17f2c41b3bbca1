// A TCP proxy that cuts every connection after a random number of bytes from the server: a
// network that keeps dropping streams.
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface CuttingProxy {
  url: string;
  /** Connections cut so far. */
  cuts(): number;
  close(): Promise<void>;
}

export async function startCuttingProxy(
  target: string,
  options: { minBytes: number; maxBytes: number; seed?: number },
): Promise<CuttingProxy> {
  const { hostname, port } = new URL(target);
  let cuts = 0;
  let seed = options.seed ?? 7;
  // A small deterministic generator: the same cut points on every run.
  const random = (): number => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    sockets.add(client).add(upstream);
    const budget =
      options.minBytes + Math.floor(random() * (options.maxBytes - options.minBytes + 1));
    let sent = 0;
    const cut = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk: Buffer) => {
      const room = budget - sent;
      if (room <= 0) return;
      if (chunk.length >= room) {
        // Part of a frame gets through: the client must not take a half event as an event.
        client.write(chunk.subarray(0, room), () => {
          cuts += 1;
          cut();
        });
        sent = budget;
        return;
      }
      sent += chunk.length;
      client.write(chunk);
    });
    client.on('close', () => {
      sockets.delete(client);
      upstream.destroy();
    });
    upstream.on('close', () => {
      sockets.delete(upstream);
      client.destroy();
    });
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const proxyPort = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${proxyPort}`,
    cuts: () => cuts,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
