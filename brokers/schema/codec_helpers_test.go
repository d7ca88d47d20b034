package schema

import (
	"context"
	"errors"
	"testing"

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
