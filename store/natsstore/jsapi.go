package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tetherhq/tether/store"
)

// The store talks to JetStream's API directly for reads, because it needs
// to choose who answers: a stream's leader answers STREAM.MSG.GET and has
// every acknowledged message; DIRECT.GET is answered by any replica, which
// may lag, but can return many messages at once. Reads that must see every
// acknowledged write ask the leader; bulk reads of the log ask any replica
// and check the answer against a bound the leader gave (see readLog).

// rawMsg is a stored message.
type rawMsg struct {
	Subject string
	Seq     uint64
	Header  nats.Header
	Data    []byte
	Time    time.Time
}

type msgGetRequest struct {
	Seq      uint64 `json:"seq,omitempty"`
	LastFor  string `json:"last_by_subj,omitempty"`
	NextFor  string `json:"next_by_subj,omitempty"`
	Batch    int    `json:"batch,omitempty"`
	MaxBytes int    `json:"max_bytes,omitempty"`
	// MultiLast asks for the last message of each subject matching these
	// filters, as of UpToSeq (DIRECT.GET only).
	MultiLast []string `json:"multi_last,omitempty"`
	UpToSeq   uint64   `json:"up_to_seq,omitempty"`
}

type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject string    `json:"subject"`
		Seq     uint64    `json:"seq"`
		Header  []byte    `json:"hdrs,omitempty"`
		Data    []byte    `json:"data,omitempty"`
		Time    time.Time `json:"time"`
	} `json:"message,omitempty"`
}

// errNoMsg means the message asked for does not exist.
var errNoMsg = errors.New("natsstore: no message")

// errCAS means a publish found another last sequence on its subject than it
// expected.
var errCAS = errors.New("natsstore: wrong last sequence")

// apiPrefix is JetStream's API subject prefix (no domains).
const apiPrefix = "$JS.API."

// leaderGet reads one message from the leader of a stream.
func (s *Store) leaderGet(ctx context.Context, stream string, req msgGetRequest) (*rawMsg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var resp msgGetResponse
	err = s.retry(ctx, func(ctx context.Context) error {
		m, err := s.nc.RequestWithContext(ctx, apiPrefix+"STREAM.MSG.GET."+stream, body)
		if err != nil {
			return err
		}
		resp = msgGetResponse{}
		return json.Unmarshal(m.Data, &resp)
	})
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound || resp.Error.Code == 404 {
			return nil, errNoMsg
		}
		return nil, resp.Error
	}
	if resp.Message == nil {
		return nil, errors.New("natsstore: empty answer to a message get")
	}
	m := resp.Message
	r := &rawMsg{Subject: m.Subject, Seq: m.Seq, Data: m.Data, Time: m.Time}
	if len(m.Header) > 0 {
		if r.Header, err = nats.DecodeHeadersMsg(m.Header); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// directBatch asks any replica of a stream for up to req.Batch messages, or
// for the last messages of req.MultiLast. The answer may lag the leader; it
// is never wrong about the messages it returns.
func (s *Store) directBatch(ctx context.Context, stream string, req msgGetRequest) ([]*rawMsg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishRequest(apiPrefix+"DIRECT.GET."+stream, inbox, body); err != nil {
		return nil, err
	}
	var out []*rawMsg
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, err
		}
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			switch m.Header.Get("Status") {
			case "204": // end of batch
				return out, nil
			case "404":
				return out, nil
			case "503":
				return nil, nats.ErrNoResponders
			default:
				return nil, fmt.Errorf("natsstore: direct get: %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
			}
		}
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("natsstore: direct get: bad sequence: %w", err)
		}
		ts, _ := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
		out = append(out, &rawMsg{Subject: m.Header.Get(jetstream.SubjectHeader), Seq: seq, Header: m.Header, Data: m.Data, Time: ts})
		if req.Batch == 0 && len(req.MultiLast) == 0 {
			return out, nil
		}
	}
}

// publish stores a message, expecting the last sequence on its subject to
// be expect (unless it is negative), and returns its sequence. It returns
// errCAS if it was not.
func (s *Store) publish(ctx context.Context, subject string, data []byte, expect int64, msgID string, ttl time.Duration) (*jetstream.PubAck, error) {
	m := nats.NewMsg(subject)
	m.Data = data
	if expect >= 0 {
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatInt(expect, 10))
	}
	if msgID != "" {
		m.Header.Set(jetstream.MsgIDHeader, msgID)
	}
	if ttl > 0 {
		m.Header.Set(jetstream.MsgTTLHeader, strconv.FormatInt(int64(ttl/time.Second), 10))
	}
	f, err := s.js.PublishMsgAsync(m)
	if err != nil {
		return nil, translatePub(err)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	select {
	case ack := <-f.Ok():
		return ack, nil
	case err := <-f.Err():
		return nil, translatePub(err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// translatePub maps a publish error: errCAS for a wrong last sequence,
// store.ErrTooLarge (wrapping err) for a message too large for the server
// the connection is on (its max_payload, which may be smaller than the one
// Open saw, after a reconnect) or for the stream (its max_msg_size). Both
// surely stored nothing.
func translatePub(err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return errCAS
	}
	if errors.Is(err, nats.ErrMaxPayload) || errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum {
		return fmt.Errorf("%w: %w", store.ErrTooLarge, err)
	}
	return err
}

// bound gives ctx the store's request timeout unless it has a deadline.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.opts.Timeout)
}

// retry runs a request, again after a short pause while JetStream answers
// that no one is there (a stream leader is being elected).
func (s *Store) retry(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	wait := 20 * time.Millisecond
	for {
		err := fn(ctx)
		if err == nil || !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

func transient(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, nats.ErrNoResponders) ||
		(errors.As(err, &apiErr) && (apiErr.Code == 503 || apiErr.ErrorCode == jetstream.JSErrCodeJetStreamNotEnabled))
}
