package schema

import (
	"errors"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The direct Protobuf encoder reads the writer's JSON token by token and writes the message's
// wire format with google.golang.org/protobuf/encoding/protowire, with a program compiled once
// per message from its descriptor: no generic map, no dynamicpb message. It writes the bytes
// proto.MarshalOptions{Deterministic: true} writes for the dynamicpb message toProto fills:
// fields in that marshaller's order (by number, the members of real oneofs last), a proto3
// field without presence left out when it holds its zero value, map entries sorted by key.
// Well-known types (Timestamp, Struct, ...) go through protojson and proto.Marshal as before.
//
// Like the Avro one, it only succeeds where the generic path (protojson.go) would produce the
// same bytes, and gives up on anything else, a payload that does not fit included: the codec
// then runs the generic path, which words the error.

// protoMsg is the compiled form of a message.
type protoMsg struct {
	md        protoreflect.MessageDescriptor
	wellKnown bool
	// unsupported: required fields or groups, left to the generic path.
	unsupported bool
	fields      []protoField
	byName      map[string]int
	// order lists the field indexes in the order the marshaller writes them; rank is the
	// position of each field index in order.
	order []int
	rank  []int
	// index is the message's indexes in its file (messageIndex).
	index []int
}

// protoField is a compiled field.
type protoField struct {
	fd       protoreflect.FieldDescriptor
	kind     protoreflect.Kind
	num      protowire.Number
	list     bool
	isMap    bool
	packed   bool
	presence bool
	oneof    int // index of its real oneof, -1
	// msg is the message of a message field (or of a map's values); key and value are a map's.
	msg        *protoMsg
	key, value *protoField
	// enum names an enum's values.
	enum map[string]int32
}

// compileProto compiles md, each message once so that recursive messages terminate.
func compileProto(md protoreflect.MessageDescriptor, done map[protoreflect.FullName]*protoMsg) *protoMsg {
	if m, ok := done[md.FullName()]; ok {
		return m
	}
	m := &protoMsg{md: md, wellKnown: wellKnown(md), byName: map[string]int{}, index: messageIndex(md)}
	done[md.FullName()] = m
	if m.wellKnown {
		return m
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		m.fields = append(m.fields, compileProtoField(fd, done))
		if fd.Cardinality() == protoreflect.Required || fd.Kind() == protoreflect.GroupKind {
			m.unsupported = true
		}
	}
	for i := range fields.Len() { // as toProto looks a member up: JSON name first, then text name
		if _, ok := m.byName[fields.Get(i).TextName()]; !ok {
			m.byName[fields.Get(i).TextName()] = i
		}
	}
	for i := range fields.Len() {
		m.byName[fields.Get(i).JSONName()] = i
	}
	m.order = make([]int, len(m.fields))
	for i := range m.order {
		m.order[i] = i
	}
	slices.SortFunc(m.order, func(a, b int) int { return marshalOrder(m.fields[a], m.fields[b]) })
	m.rank = make([]int, len(m.fields))
	for r, i := range m.order {
		m.rank[i] = r
	}
	return m
}

// marshalOrder is the order proto.MarshalOptions{Deterministic: true} writes a message's fields
// in (protobuf-go's order.LegacyFieldOrder): fields outside real oneofs first, then each oneof's
// in declaration order, by number within each.
func marshalOrder(x, y protoField) int {
	inX, inY := x.oneof >= 0, y.oneof >= 0
	switch {
	case inX != inY:
		if inY {
			return -1
		}
		return 1
	case inX && x.oneof != y.oneof:
		return x.oneof - y.oneof
	}
	return int(x.num) - int(y.num)
}

func compileProtoField(fd protoreflect.FieldDescriptor, done map[protoreflect.FullName]*protoMsg) protoField {
	f := protoField{fd: fd, kind: fd.Kind(), num: fd.Number(), list: fd.IsList(), isMap: fd.IsMap(),
		packed: fd.IsPacked(), presence: fd.HasPresence(), oneof: -1}
	if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
		f.oneof = od.Index()
	}
	if f.isMap {
		k, v := compileProtoField(fd.MapKey(), done), compileProtoField(fd.MapValue(), done)
		f.key, f.value = &k, &v
		return f
	}
	if md := fd.Message(); md != nil {
		f.msg = compileProto(md, done)
	}
	if ed := fd.Enum(); ed != nil {
		f.enum = map[string]int32{}
		for i := range ed.Values().Len() {
			v := ed.Values().Get(i)
			f.enum[string(v.Name())] = int32(v.Number())
		}
	}
	return f
}

// protoDirect encodes JSON payloads with the compiled messages of a file.
type protoDirect struct {
	messages map[protoreflect.FullName]*protoMsg
}

func newProtoDirect(file protoreflect.FileDescriptor) protoDirect {
	d := protoDirect{messages: map[protoreflect.FullName]*protoMsg{}}
	var add func(protoreflect.MessageDescriptors)
	add = func(msgs protoreflect.MessageDescriptors) {
		for i := range msgs.Len() {
			compileProto(msgs.Get(i), d.messages)
			add(msgs.Get(i).Messages())
		}
	}
	add(file.Messages())
	return d
}

// index returns md's message indexes.
func (d protoDirect) index(md protoreflect.MessageDescriptor) []int {
	if m, ok := d.messages[md.FullName()]; ok {
		return m.index
	}
	return messageIndex(md)
}

// encode returns payload encoded as md, or false when the generic path must decide.
func (d protoDirect) encode(md protoreflect.MessageDescriptor, payload []byte) ([]byte, bool) {
	return d.appendEncode(make([]byte, 0, len(payload)), md, payload)
}

// appendEncode appends payload encoded as md to buf.
func (d protoDirect) appendEncode(buf []byte, md protoreflect.MessageDescriptor, payload []byte) ([]byte, bool) {
	m, ok := d.messages[md.FullName()]
	if !ok || m.wellKnown {
		return nil, false
	}
	s := jsonScanner{data: payload}
	buf, err := protoMessage(&s, m, buf)
	if err != nil || !s.atEnd() {
		return nil, false
	}
	return buf, true
}

// protoMessage appends the fields of the JSON object at s: straight from the JSON while its
// members come in the marshaller's order, else from where each member was found.
func protoMessage(s *jsonScanner, m *protoMsg, buf []byte) ([]byte, error) {
	if m.unsupported || !s.consume('{') {
		return buf, errGiveUp
	}
	start, bufStart := s.pos, len(buf)
	last := -1
	var set memberSet
	err := s.members(func(name []byte, escaped bool) error {
		i, ok := m.byName[string(name)]
		switch {
		case escaped:
			return errOutOfOrder
		case !ok:
			return errGiveUp
		case m.rank[i] < last:
			return errOutOfOrder
		}
		last = m.rank[i]
		if !set.add(m, i) {
			return errGiveUp
		}
		var err error
		buf, err = protoMember(s, &m.fields[i], buf)
		return err
	})
	if errors.Is(err, errOutOfOrder) {
		s.pos = start
		return protoByPosition(s, m, buf[:bufStart])
	}
	return buf, err
}

// protoByPosition reads a message's members (its '{' read), noting where each value is, and then
// writes them in the marshaller's order.
func protoByPosition(s *jsonScanner, m *protoMsg, buf []byte) ([]byte, error) {
	spans := make([]int, len(m.fields))
	var set memberSet
	err := s.members(func(name []byte, escaped bool) error {
		i, ok := m.byName[string(name)]
		if escaped {
			key, err := unquoteName(name, escaped)
			if err != nil {
				return errGiveUp
			}
			i, ok = m.byName[key]
		}
		if !ok || !set.add(m, i) {
			return errGiveUp
		}
		start, _, err := s.skip()
		spans[i] = start + 1
		return err
	})
	if err != nil {
		return buf, err
	}
	end := s.pos
	for _, i := range m.order {
		if spans[i] == 0 {
			continue
		}
		s.pos = spans[i] - 1
		if buf, err = protoMember(s, &m.fields[i], buf); err != nil {
			return buf, err
		}
	}
	s.pos = end
	return buf, nil
}

// memberSet tells a field named twice (by both its names, or a member repeated) and a second
// member of one oneof; both are left to the generic path.
type memberSet struct {
	fields, oneofs uint64
}

func (ms *memberSet) add(m *protoMsg, i int) bool {
	if i >= 64 || m.fields[i].oneof >= 64 || ms.fields&(1<<i) != 0 {
		return false
	}
	ms.fields |= 1 << i
	if o := m.fields[i].oneof; o >= 0 {
		if ms.oneofs&(1<<o) != 0 {
			return false
		}
		ms.oneofs |= 1 << o
	}
	return true
}
