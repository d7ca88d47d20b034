package waves

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/outbox"
)

// fakePublisher records every Publish call; a call holding a message whose UUID is in fail
// fails whole with its error, for times[UUID] calls (0: always).
type fakePublisher struct {
	mu    sync.Mutex
	calls [][]string
	fail  map[string]error
	times map[string]int
}

var errPermanent = errors.New("permanent")

func (p *fakePublisher) Publish(_ string, msgs ...*message.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	var err error
	for _, m := range msgs {
		ids = append(ids, m.UUID)
		if e, ok := p.fail[m.UUID]; ok {
			err = e
			if p.times[m.UUID]--; p.times[m.UUID] == 0 {
				delete(p.fail, m.UUID)
			}
		}
	}
	p.calls = append(p.calls, ids)
	return err
}

func (p *fakePublisher) Close() error { return nil }

// keyed returns messages whose UUID is their index and whose aggregate id is the given key.
func keyed(keys ...string) []*message.Message {
	msgs := make([]*message.Message, len(keys))
	for i, k := range keys {
		msgs[i] = message.NewMessage(fmt.Sprint(i), nil)
		msgs[i].Metadata.Set(outbox.MetadataAggregateID, k)
	}
	return msgs
}

// TestWavesSendTheKthMessageOfEveryKeyPerCall: wave k carries the k-th message of each key, in
// input order, one call per wave.
func TestWavesSendTheKthMessageOfEveryKeyPerCall(t *testing.T) {
	pub := &fakePublisher{}
	errs := New(pub, nil, nil).PublishEach(context.Background(), "t", keyed("a", "b", "a", "c", "a", "b"))
	if got, want := fmt.Sprint(pub.calls), "[[0 1 3] [2 5] [4]]"; got != want {
		t.Fatalf("calls = %s, want %s", got, want)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("errs[%d] = %v", i, err)
		}
	}
}

// TestWavesIsolateAFailureAndHoldItsKeyBack: a failed wave is sent again one message at a time;
// the failing message's key is held back from the later waves, the other keys go on.
func TestWavesIsolateAFailureAndHoldItsKeyBack(t *testing.T) {
	boom := errors.New("boom")
	pub := &fakePublisher{fail: map[string]error{"1": boom}, times: map[string]int{}}
	errs := New(pub, nil, nil).PublishEach(context.Background(), "t", keyed("a", "b", "a", "b"))
	want := []error{nil, boom, nil, ErrHeldBack}
	for i := range want {
		if !errors.Is(errs[i], want[i]) {
			t.Fatalf("errs = %v, want %v", errs, want)
		}
	}
	// Wave 1: [0 1] failed, then 0 and 1 alone (in either order); wave 2: 2 only.
	if len(pub.calls) != 4 || !slices.Equal(pub.calls[0], []string{"0", "1"}) || !slices.Equal(pub.calls[3], []string{"2"}) {
		t.Fatalf("calls = %v", pub.calls)
	}
}

// TestWavesConfirmAPermanentFailureAlone: a message that failed permanently in the call and in
// its isolation is sent once more alone before it is reported failed; here the confirmation
// goes through, so it is acknowledged.
func TestWavesConfirmAPermanentFailureAlone(t *testing.T) {
	isolated := 0
	pub := &fakePublisher{fail: map[string]error{"0": errPermanent}, times: map[string]int{"0": 2}}
	retriable := func(err error) bool { return !errors.Is(err, errPermanent) }
	p := New(pub, retriable, nil)
	errs := p.PublishEach(context.Background(), "t", keyed("a", "b"))
	for _, c := range pub.calls {
		if len(c) == 1 {
			isolated++
		}
	}
	if errs[0] != nil || errs[1] != nil || isolated != 3 {
		t.Fatalf("errs = %v, calls = %v", errs, pub.calls)
	}
	if !p.Retriable(ErrHeldBack) || p.Retriable(errPermanent) {
		t.Fatal("Retriable: ErrHeldBack retriable, the classifier's permanent error not")
	}
}
