package schema

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/sr"
)

// mismatchCase is a payload that does not fit a topic's schema, with the field path and the
// reason the encoder must name.
type mismatchCase struct{ payload, path, reason string }

// checkMismatches encodes each case's payload for topic with enc and fails the test unless the
// error is a *MismatchError naming the case's path and reason and the topic's subject, and is
// not retriable (the event's own fault).
func checkMismatches(t *testing.T, enc *Encoder, topic string, cases []mismatchCase) {
	t.Helper()
	for _, tc := range cases {
		_, err := enc.Encode(context.Background(), topic, []byte(tc.payload))
		var mismatch *MismatchError
		if !errors.As(err, &mismatch) {
			t.Errorf("%s: err %v, want a *MismatchError", tc.payload, err)
			continue
		}
		if mismatch.Path != tc.path || mismatch.Reason != tc.reason || mismatch.Subject != Subject(topic) {
			t.Errorf("%s: got path %q reason %q subject %q, want %q %q %q", tc.payload,
				mismatch.Path, mismatch.Reason, mismatch.Subject, tc.path, tc.reason, Subject(topic))
		}
		if Retriable(err) {
			t.Errorf("%s: Retriable(%v) = true, want false", tc.payload, err)
		}
	}
}

// codecs returns an encoder (Config{}: the topic's subject) and a decoder of the registry cl.
func codecs(t *testing.T, cl *sr.Client) (*Encoder, *Decoder) {
	t.Helper()
	enc, err := NewEncoder(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := NewDecoder(cl)
	if err != nil {
		t.Fatal(err)
	}
	return enc, dec
}

// checkPaidMismatchBatch checks the outcomes errs that pub reported for the batch P0, Q0, P1,
// Q1, P2 in which P1 does not fit at $.paid: P1 fails permanently naming the path, P2 is held
// back retriably (ErrEarlierMessageNotEncoded), the others are delivered.
func checkPaidMismatchBatch(t *testing.T, pub message.Publisher, errs []error) {
	t.Helper()
	classifier := pub.(errorClassifier)
	for i, want := range []string{"", "", "mismatch", "", "held"} {
		err := errs[i]
		var mismatch *MismatchError
		switch want {
		case "":
			if err != nil {
				t.Errorf("message %d: %v", i, err)
			}
		case "mismatch":
			if !errors.As(err, &mismatch) || mismatch.Path != "$.paid" || classifier.Retriable(err) {
				t.Errorf("message %d: %v, want a permanent mismatch at $.paid", i, err)
			}
		case "held":
			if !errors.Is(err, ErrEarlierMessageNotEncoded) || !classifier.Retriable(err) {
				t.Errorf("message %d: %v, want retriable ErrEarlierMessageNotEncoded", i, err)
			}
		}
	}
}

// orderWithDefaults returns the JSON order payload decoded (numbers as json.Number) with the
// defaults of the registry's Order schema filled in where it has no value: what a consumer
// decoding the Avro record reads.
func orderWithDefaults(t *testing.T, payload string) map[string]any {
	t.Helper()
	want := map[string]any{}
	d := json.NewDecoder(strings.NewReader(payload))
	d.UseNumber()
	if err := d.Decode(&want); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"note": nil, "tags": []any{}, "attrs": map[string]any{}} {
		if _, ok := want[k]; !ok {
			want[k] = v
		}
	}
	return want
}
