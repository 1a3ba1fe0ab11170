/** The server under test: $MEMORYD_ADDRESS when given (it must store transcripts), otherwise a
 * memoryd started here on a free port with its own data directory ($MEMORYD_PYTHON -m memoryd). */

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

export interface Server {
  address: string;
  stop(): Promise<void>;
}

export async function startServer(): Promise<Server> {
  const given = process.env.MEMORYD_ADDRESS;
  if (given) {
    return { address: given, stop: async () => {} };
  }
  const home = mkdtempSync(join(tmpdir(), "memoryd-ts-test-"));
  const config = join(home, "test-config.toml");
  writeFileSync(config, "[memoryd.realtime]\npersist_transcripts = true\n", { mode: 0o600 });
  const python = process.env.MEMORYD_PYTHON ?? "python3";
  const child: ChildProcess = spawn(
    python,
    ["-m", "memoryd", "serve", "--home", join(home, "data"), "--listen", "127.0.0.1:0", "--config", config],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const address = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("memoryd did not start within 60 s")), 60_000);
    child.once("error", reject);
    createInterface({ input: child.stderr! }).on("line", (line) => {
      try {
        const record = JSON.parse(line) as { event?: string; address?: string };
        if (record.event === "serving" && record.address) {
          clearTimeout(timer);
          resolve(record.address);
        }
      } catch {
        // not a JSON log line
      }
    });
  });
  return {
    address,
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
