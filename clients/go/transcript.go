package memoryd

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v2"
)

// MaxReconnects bounds the reconnects of one call of a Transcript.
const MaxReconnects = 5

// Transcript is a StreamTranscript session that survives a cut stream: finals are kept until an
// acknowledgement covers them, and after a reconnect (same session id) the server's committed
// seq says which to send again. Partials are never stored, so none is replayed. Not safe for
// concurrent use. Each call takes its own context: cancelling it ends that call (the stream is
// cut, and the finals not yet acknowledged are sent again by the next call).
type Transcript struct {
	client    *Client
	open      *pb.TranscriptOpen
	stream    pb.ConversationService_StreamTranscriptClient
	cancel    context.CancelFunc
	pending   []*pb.TranscriptSegment
	committed int64
	// Resumed says the last (re)connection found the session already known to the server.
	Resumed bool
	// Persisted says the server stores finals ([memoryd.realtime] persist_transcripts).
	Persisted bool
	// Reconnects counts the streams opened after the first.
	Reconnects int
}

// OpenTranscript opens (or resumes) a session; ctx bounds the opening. The session lasts until
// End, or until the client is closed.
func (c *Client) OpenTranscript(ctx context.Context, open *pb.TranscriptOpen) (*Transcript, error) {
	t := &Transcript{client: c, open: open}
	stop := context.AfterFunc(ctx, t.Cut)
	defer stop()
	if err := t.connect(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return t, nil
}

// Committed is the highest seq whose final (and every one before it) the server has committed.
func (t *Transcript) Committed() int64 { return t.committed }

func (t *Transcript) connect() error {
	if t.cancel != nil {
		t.cancel()
	}
	streamCtx, cancel := context.WithCancel(context.Background())
	stream, err := t.client.Conversations.StreamTranscript(streamCtx)
	if err == nil {
		err = stream.Send(&pb.StreamTranscriptRequest{Kind: &pb.StreamTranscriptRequest_Open{Open: t.open}})
	}
	var first *pb.StreamTranscriptResponse
	if err == nil {
		first, err = stream.Recv()
	}
	if err != nil {
		cancel()
		return err
	}
	t.stream, t.cancel = stream, cancel
	t.Resumed, t.Persisted = first.GetResumed(), first.GetPersisted()
	t.acknowledge(first.GetCommittedSeq())
	return nil
}

func (t *Transcript) acknowledge(seq int64) {
	if seq > t.committed {
		t.committed = seq
	}
	kept := t.pending[:0]
	for _, segment := range t.pending {
		if segment.GetSeq() > t.committed {
			kept = append(kept, segment)
		}
	}
	t.pending = kept
}

// Partial sends a partial segment (never stored; lost, harmlessly, if the stream is cut).
func (t *Transcript) Partial(ctx context.Context, seq int64, speaker pb.Speaker, text string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	segment := &pb.TranscriptSegment{Seq: seq, Speaker: speaker, Partial: true, Text: text}
	return t.stream.Send(&pb.StreamTranscriptRequest{Kind: &pb.StreamTranscriptRequest_Segment{Segment: segment}})
}

// Final sends a final segment and returns once the server acknowledged it (committed it, with
// persistence on). A cut stream is reopened and every unacknowledged final sent again.
func (t *Transcript) Final(ctx context.Context, seq int64, speaker pb.Speaker, text string) error {
	t.pending = append(t.pending, &pb.TranscriptSegment{Seq: seq, Speaker: speaker, Text: text})
	return t.flush(ctx)
}

func (t *Transcript) flush(ctx context.Context) error {
	stop := context.AfterFunc(ctx, t.Cut) // a cancelled call cuts the stream it waits on
	defer stop()
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := t.sendPending()
		if err == nil {
			return nil
		}
		code := status.Code(err)
		retryable := code == codes.Unknown || code == codes.Unavailable || code == codes.Canceled
		if !retryable || ctx.Err() != nil || attempt >= MaxReconnects {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if attempt > 0 { // the first reconnect is at once, later ones wait longer each time
			select {
			case <-time.After(time.Duration(100<<(attempt-1)) * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		_ = t.reconnect() // a failed reconnect is tried again on the next attempt
	}
}

func (t *Transcript) sendPending() error {
	for len(t.pending) > 0 {
		segment := t.pending[0]
		request := &pb.StreamTranscriptRequest{Kind: &pb.StreamTranscriptRequest_Segment{Segment: segment}}
		if err := t.stream.Send(request); err != nil {
			return t.statusOf(err)
		}
		ack, err := t.stream.Recv()
		if err != nil {
			return err
		}
		t.acknowledge(ack.GetCommittedSeq())
		if t.committed < segment.GetSeq() {
			return fmt.Errorf("memoryd: final %d was answered with committed seq %d", segment.GetSeq(), t.committed)
		}
	}
	return nil
}

// statusOf: a Send that fails reports io.EOF; the stream's status comes from Recv.
func (t *Transcript) statusOf(err error) error {
	if _, recvErr := t.stream.Recv(); recvErr != nil {
		return recvErr
	}
	return err
}

func (t *Transcript) reconnect() error {
	t.Reconnects++
	return t.connect()
}

// Cut drops the current stream as a network failure would (the next Final reconnects).
func (t *Transcript) Cut() {
	if t.cancel != nil {
		t.cancel()
	}
}

// End closes the session cleanly and returns its totals (of the last stream).
func (t *Transcript) End(ctx context.Context) (*pb.TranscriptTotals, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, t.Cut)
	defer stop()
	end := &pb.StreamTranscriptRequest{Kind: &pb.StreamTranscriptRequest_End{End: &pb.TranscriptEnd{}}}
	if err := t.stream.Send(end); err != nil {
		return nil, t.statusOf(err)
	}
	last, err := t.stream.Recv()
	if err != nil {
		return nil, err
	}
	if err := t.stream.CloseSend(); err != nil {
		return nil, err
	}
	t.cancel()
	return last.GetTotals(), nil
}
