package schema

import (
	"strconv"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/sr"
)

// The CloudEvents metadata the publisher sets with CloudEventsAttributes: the Kafka protocol
// binding's content-type header (datacontenttype) and the ce_dataschema attribute.
const (
	// MetadataContentType is the content-type header: ContentTypeAvro, ContentTypeProtobuf or
	// ContentTypeJSON, as the event was encoded.
	MetadataContentType = "content-type"
	// MetadataDataSchema is the ce_dataschema attribute: the registry URL of the schema the event
	// was encoded with, <registry URL>/schemas/ids/<id>.
	MetadataDataSchema = "ce_dataschema"
)

// The content types of the three formats (in the Confluent wire format).
const (
	ContentTypeAvro     = "application/avro"
	ContentTypeProtobuf = "application/protobuf"
	ContentTypeJSON     = "application/json"
)

// PublisherOption configures NewPublisher.
type PublisherOption func(*publisher)

// CloudEventsAttributes makes the publisher set the CloudEvents attributes of the encoding on
// every message it encodes: content-type (the format's content type, replacing the writer's) and
// ce_dataschema (registryURL/schemas/ids/<id>, the registry's URL of the schema). Used when the
// events are CloudEvents (brokers/cloudevents' publisher, wrapped by this one, keeps both).
func CloudEventsAttributes(registryURL string) PublisherOption {
	return func(p *publisher) {
		p.cloudEvents = &cloudEventsAttributes{base: strings.TrimSuffix(registryURL, "/")}
	}
}

type cloudEventsAttributes struct{ base string }

func (c *cloudEventsAttributes) set(msg *message.Message, s cached) {
	for k := range msg.Metadata { // one content-type header, whatever the writer's spelling
		if strings.EqualFold(k, MetadataContentType) {
			delete(msg.Metadata, k)
		}
	}
	switch s.typ {
	case sr.TypeProtobuf:
		msg.Metadata.Set(MetadataContentType, ContentTypeProtobuf)
	case sr.TypeJSON:
		msg.Metadata.Set(MetadataContentType, ContentTypeJSON)
	default:
		msg.Metadata.Set(MetadataContentType, ContentTypeAvro)
	}
	msg.Metadata.Set(MetadataDataSchema, c.base+"/schemas/ids/"+strconv.Itoa(s.id))
}
