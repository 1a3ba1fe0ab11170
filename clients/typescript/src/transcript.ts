/**
 * A StreamTranscript session that survives a cut stream: finals are kept until an
 * acknowledgement covers them, and after a reconnect (same session id) the server's committed
 * seq says which to send again. Partials are never stored, so none is replayed.
 */

import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { createWritableIterable, type WritableIterable } from "@connectrpc/connect/protocol";

import {
  type ConversationService,
  type Speaker,
  type StreamTranscriptRequestSchema,
  type StreamTranscriptResponse,
  type TranscriptOpenSchema,
  type TranscriptTotals,
} from "./gen/memoryd/v2/conversation_service_pb.js";

export type TranscriptOpenInit = MessageInitShape<typeof TranscriptOpenSchema>;
type Request = MessageInitShape<typeof StreamTranscriptRequestSchema>;
interface Final {
  seq: bigint;
  speaker: Speaker;
  text: string;
}

/** Reconnects one call may make before it gives up. */
export const MAX_RECONNECTS = 5;

interface Stream {
  requests: WritableIterable<Request>;
  responses: AsyncIterator<StreamTranscriptResponse>;
  abort: AbortController;
}

export class Transcript {
  private stream: Stream | undefined;
  private pending: Final[] = [];
  private committedSeq = 0n;
  /** The last (re)connection found the session already known to the server. */
  resumed = false;
  /** The server stores finals ([memoryd.realtime] persist_transcripts). */
  persisted = false;
  /** Streams opened after the first. */
  reconnects = 0;

  private constructor(
    private readonly conversations: Client<typeof ConversationService>,
    private readonly opening: TranscriptOpenInit,
  ) {}

  static async open(
    conversations: Client<typeof ConversationService>,
    open: TranscriptOpenInit,
  ): Promise<Transcript> {
    const transcript = new Transcript(conversations, open);
    await transcript.connect();
    return transcript;
  }

  /** The highest seq whose final, and every one before it, the server has committed. */
  get committed(): bigint {
    return this.committedSeq;
  }

  private async connect(): Promise<void> {
    this.stream?.abort.abort();
    const requests = createWritableIterable<Request>();
    const abort = new AbortController();
    const answers = this.conversations.streamTranscript(requests, { signal: abort.signal, timeoutMs: 0 });
    const responses = answers[Symbol.asyncIterator]();
    send(requests, { kind: { case: "open", value: this.opening } });
    const first = await responses.next();
    if (first.done) {
      throw new ConnectError("the transcript stream ended before its first answer", Code.Unavailable);
    }
    this.stream = { requests, responses, abort };
    this.resumed = first.value.resumed;
    this.persisted = first.value.persisted;
    this.acknowledge(first.value.committedSeq);
  }

  private acknowledge(seq: bigint): void {
    if (seq > this.committedSeq) {
      this.committedSeq = seq;
    }
    this.pending = this.pending.filter((final) => final.seq > this.committedSeq);
  }

  private current(): Stream {
    if (!this.stream) {
      throw new ConnectError("the transcript is not open", Code.FailedPrecondition);
    }
    return this.stream;
  }

  /** Send a partial segment (never stored; lost, harmlessly, when the stream is cut). */
  partial(seq: bigint | number, speaker: Speaker, text: string): void {
    send(this.current().requests, {
      kind: { case: "segment", value: { seq: BigInt(seq), speaker, partial: true, text } },
    });
  }

  /** Send a final and resolve once the server acknowledged it (committed it, with
   * persistence on). A cut stream is reopened and every unacknowledged final sent again. */
  async final(seq: bigint | number, speaker: Speaker, text: string): Promise<void> {
    this.pending.push({ seq: BigInt(seq), speaker, text });
    await this.flush();
  }

  private async flush(): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.sendPending();
        return;
      } catch (error) {
        const failure = ConnectError.from(error);
        const retryable = failure.code === Code.Unavailable || failure.code === Code.Canceled;
        if (!retryable || attempt >= MAX_RECONNECTS) {
          throw failure;
        }
        if (attempt > 0) {
          // The first reconnect is at once, later ones wait longer each time.
          await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** (attempt - 1)));
        }
        this.reconnects++;
        try {
          await this.connect();
        } catch {
          // tried again on the next attempt
        }
      }
    }
  }

  private async sendPending(): Promise<void> {
    const stream = this.current();
    while (this.pending.length > 0) {
      const final = this.pending[0];
      send(stream.requests, { kind: { case: "segment", value: { ...final, partial: false } } });
      const ack = await stream.responses.next();
      if (ack.done) {
        throw new ConnectError("the transcript stream ended", Code.Unavailable);
      }
      this.acknowledge(ack.value.committedSeq);
      if (this.committedSeq < final.seq) {
        throw new ConnectError(
          `final ${final.seq} was answered with committed seq ${this.committedSeq}`,
          Code.Internal,
        );
      }
    }
  }

  /** Drop the current stream as a network failure would (the next final reconnects). */
  cut(): void {
    this.stream?.abort.abort();
  }

  /** Close the session cleanly; its totals (of the last stream). */
  async end(): Promise<TranscriptTotals | undefined> {
    await this.flush();
    const stream = this.current();
    send(stream.requests, { kind: { case: "end", value: {} } });
    const last = await stream.responses.next();
    stream.requests.close();
    if (last.done) {
      throw new ConnectError("the transcript stream ended before its totals", Code.Unavailable);
    }
    await stream.responses.return?.();
    this.stream = undefined;
    return last.value.totals;
  }
}

/** Queue a request on a stream without waiting for the transport to take it: a stream that
 * fails refuses the write, and the failure surfaces from its responses instead. */
function send(requests: WritableIterable<Request>, request: Request): void {
  requests.write(request).catch(() => undefined);
}
