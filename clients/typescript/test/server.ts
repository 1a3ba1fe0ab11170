/** The server under test: $MEMORYD_ADDRESS when given (it must store transcripts), otherwise a
 * memoryd started here on a free port with its own data directory ($MEMORYD_PYTHON -m memoryd). */

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

export interface Server {
  address: string;
  /** With `http`: the HTTP/JSON listener's HOST:PORT ([memoryd.http] listen). */
  http?: string;
  /** With TLS: the CA's certificate, and a client certificate it signed (PEM). */
  tls?: { ca: string; clientCert: string; clientKey: string };
  stop(): Promise<void>;
}

// The repository root (dist/test/server.js is four levels below it): tests/certificates.py
// makes the throwaway CA the server's own TLS tests use.
const ROOT = fileURLToPath(new URL("../../../../", import.meta.url));

function certificates(python: string, folder: string): void {
  const script = [
    "import sys; from pathlib import Path",
    `sys.path.insert(0, ${JSON.stringify(ROOT)})`,
    "from tests.certificates import Authority",
    `folder = Path(${JSON.stringify(folder)})`,
    "ca = Authority(folder)",
    "ca.issue('server', server=True); ca.issue('client', server=False)",
    "(folder / 'ca.pem').write_bytes(ca.pem.read_bytes())",
    "for key in folder.glob('*.key'): key.chmod(0o600)",
  ].join("\n");
  execFileSync(python, ["-c", script]);
}

export async function startServer(options: { tls?: "mutual"; http?: boolean } = {}): Promise<Server> {
  const given = process.env.MEMORYD_ADDRESS;
  if (given && !options.tls && !options.http) {
    return { address: given, stop: async () => {} };
  }
  const home = mkdtempSync(join(tmpdir(), "memoryd-ts-test-"));
  const config = join(home, "test-config.toml");
  const python = process.env.MEMORYD_PYTHON ?? "python3";
  let settings = "[memoryd.realtime]\npersist_transcripts = true\n";
  if (options.http) {
    settings += '[memoryd.http]\nlisten = "127.0.0.1:0"\n';
  }
  let tls: Server["tls"];
  if (options.tls) {
    certificates(python, home);
    settings +=
      `[memoryd.server]\ntls_cert = "${join(home, "server.pem")}"\n` +
      `tls_key = "${join(home, "server.key")}"\ntls_client_ca = "${join(home, "ca.pem")}"\n`;
    tls = {
      ca: readFileSync(join(home, "ca.pem"), "utf8"),
      clientCert: readFileSync(join(home, "client.pem"), "utf8"),
      clientKey: readFileSync(join(home, "client.key"), "utf8"),
    };
  }
  writeFileSync(config, settings, { mode: 0o600 });
  const child: ChildProcess = spawn(
    python,
    ["-m", "memoryd", "serve", "--home", join(home, "data"), "--listen", "127.0.0.1:0", "--config", config],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const { address, http } = await new Promise<{ address: string; http?: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("memoryd did not start within 60 s")), 60_000);
    child.once("error", reject);
    createInterface({ input: child.stderr! }).on("line", (line) => {
      try {
        const record = JSON.parse(line) as { event?: string; address?: string; http?: string };
        if (record.event === "serving" && record.address) {
          clearTimeout(timer);
          resolve({ address: record.address, http: record.http });
        }
      } catch {
        // not a JSON log line
      }
    });
  });
  return {
    address,
    http,
    tls,
    async stop() {
      child.kill("SIGTERM");
      await exited;
      rmSync(home, { recursive: true, force: true });
    },
  };
}

export function unique(prefix: string): string {
  return `${prefix}-${process.hrtime.bigint()}`;
}
