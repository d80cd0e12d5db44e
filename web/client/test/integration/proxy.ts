// A TCP proxy on 127.0.0.1 in front of the real server, to break
// WebSockets the way networks do: cut them (both ends see the connection
// die, no close frame).
import { connect, createServer, type Server, type Socket } from 'node:net';

interface Conn {
  client: Socket;
  upstream: Socket;
  /** The connection's first request was a WebSocket upgrade. */
  ws: boolean;
}

export class Proxy {
  private readonly conns = new Set<Conn>();
  /** WebSocket upgrades seen, in all. */
  upgrades = 0;

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  /**
   * Starts a proxy to `target`. A GET of a path in `pages` is answered by
   * the proxy itself (so that a browser loads a page from a real server on
   * the origin it then talks to); everything else goes to the target.
   */
  static async start(target: string, pages: Record<string, { type: string; body: string }> = {}): Promise<Proxy> {
    const { hostname, port } = new URL(target);
    let self!: Proxy;
    const server = createServer((client) => {
      client.on('error', () => client.destroy());
      client.once('data', (first: Buffer) => {
        const head = first.toString('latin1');
        const page = pages[/^GET (\S+) HTTP/.exec(head)?.[1]?.split('?')[0] ?? ''];
        if (page) {
          client.end(`HTTP/1.1 200 OK\r\nContent-Type: ${page.type}\r\nContent-Length: ${Buffer.byteLength(page.body)}\r\nConnection: close\r\n\r\n${page.body}`);
          return;
        }
        const upstream = connect(Number(port), hostname);
        const c: Conn = { client, upstream, ws: /^upgrade:\s*websocket/im.test(head) };
        if (c.ws) self.upgrades++;
        self.conns.add(c);
        upstream.write(first);
        client.pipe(upstream);
        upstream.pipe(client);
        const end = () => {
          self.conns.delete(c);
          client.destroy();
          upstream.destroy();
        };
        client.on('close', end);
        upstream.on('error', end).on('close', end);
      });
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    const addr = server.address();
    self = new Proxy(server, `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`);
    return self;
  }

  /** The open WebSocket connections. */
  get sockets(): number {
    return [...this.conns].filter((c) => c.ws).length;
  }

  /** Cuts every WebSocket connection: no close frame, both ends see it die. */
  cutSockets(): number {
    let n = 0;
    for (const c of this.conns) {
      if (!c.ws) continue;
      c.client.resetAndDestroy();
      c.upstream.destroy();
      n++;
    }
    return n;
  }

  async close(): Promise<void> {
    for (const c of this.conns) {
      c.client.destroy();
      c.upstream.destroy();
    }
    await new Promise((ok) => this.server.close(ok));
  }
}
