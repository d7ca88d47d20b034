package schema

import (
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
)

// MetadataEncoded is the header a writer sets on an event whose payload it has encoded itself
// (bytes in the Confluent wire format, from any language's registry serializer): the relay
// publishes such a payload untouched. Its one value is EncodedConfluent.
const MetadataEncoded = "schema_encoded"

// EncodedConfluent is MetadataEncoded's value for a payload in the Confluent wire format.
const EncodedConfluent = "confluent"

// preEncoded reports an event (not a dead letter) whose writer says it encoded the payload.
func preEncoded(msg *message.Message) bool {
	return msg != nil && !isDeadLetter(msg) && msg.Metadata.Get(MetadataEncoded) != ""
}

// checkPreEncoded refuses, permanently, an event that says it is encoded but is not in the
// Confluent wire format (at least the magic byte 0 and a 4-byte schema id), or names another
// encoding: sending it again cannot make it readable.
func checkPreEncoded(subject string, msg *message.Message) error {
	switch value := msg.Metadata.Get(MetadataEncoded); {
	case value != EncodedConfluent:
		return &MismatchError{Subject: subject, Path: "$",
			Reason: fmt.Sprintf("header %s is %q; the one encoding the relay passes through is %q", MetadataEncoded, value, EncodedConfluent)}
	case len(msg.Payload) < 5 || msg.Payload[0] != 0:
		return &MismatchError{Subject: subject, Path: "$",
			Reason: fmt.Sprintf("header %s says %s, but the payload does not start with the Confluent wire format's magic byte 0 and a 4-byte schema id", MetadataEncoded, EncodedConfluent)}
	}
	return nil
}
