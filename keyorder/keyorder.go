// Package keyorder is the one implementation of the waves: the order in which a publisher sends
// the messages of one call so that the messages of a key keep their order on the broker, even
// when the broker fails one message and stores the next.
//
// The messages of a call go out in rounds, one round after the other; the caller sends a round
// and collects its outcomes before the next round starts. A key stops at its first failure:
// its messages in the later rounds are held back, unsent, so a key's failures are gapless.
//
//   - Waves: round k holds the k-th message of every key. A key never has two messages in
//     flight, while any number of keys share a round (one broker round trip).
//   - Segments: a key's messages stay in one round until cut says that the next one must wait
//     for the earlier ones; for a sender that keeps the order of a key within one round (the
//     forwarder cuts a key's events at each change of topic, since a publisher keeps a key's
//     order within one call to one topic).
//
// The forwarder's waves adapter (a plain Watermill publisher made one with an outcome per
// message), the forwarder's at-least-once delivery and the brokers/nats and brokers/rabbitmq
// publishers build on it. It depends on the standard library only; a key is any comparable
// value (a string, a hash).
package keyorder

// Plan is the rounds of one call and the keys that stopped. It is not safe for concurrent use:
// Run, and Stop from within its callbacks, run on one goroutine.
type Plan[K comparable] struct {
	keys    []K
	rounds  [][]int
	stopped map[K]bool
}

// Waves plans a call of len(keys) messages, keys[i] the key of message i, in waves: round k
// holds the indexes of the k-th message of every key, in the order of keys.
func Waves[K comparable](keys []K) *Plan[K] {
	return Segments(keys, func(int, int) bool { return true })
}

// Segments plans a call of len(keys) messages, keys[i] the key of message i: message i joins
// the round of the previous message of its key, prev, unless cut(prev, i) says it must wait for
// it (then it is in the next round). A key's first message is in round 0.
func Segments[K comparable](keys []K, cut func(prev, next int) bool) *Plan[K] {
	type last struct{ index, round int }
	seen := make(map[K]last, len(keys))
	var rounds [][]int
	for i, k := range keys {
		round := 0
		if l, ok := seen[k]; ok {
			round = l.round
			if cut(l.index, i) {
				round++
			}
		}
		seen[k] = last{index: i, round: round}
		if round == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[round] = append(rounds[round], i)
	}
	return &Plan[K]{keys: keys, rounds: rounds, stopped: map[K]bool{}}
}

// Run goes through the rounds in order. Each index whose key stopped goes to held; the others
// of the round go to send, in order (a round left empty is skipped). send reports false to end
// the run: the later rounds are then neither sent nor held.
func (p *Plan[K]) Run(send func(round []int) bool, held func(i int)) {
	for _, round := range p.rounds {
		todo := round[:0:0]
		for _, i := range round {
			if p.stopped[p.keys[i]] {
				held(i)
				continue
			}
			todo = append(todo, i)
		}
		if len(todo) > 0 && !send(todo) {
			return
		}
	}
}

// Stop stops key k: its messages in the later rounds are held back. A sender calls it with the
// key of each message that failed.
func (p *Plan[K]) Stop(k K) { p.stopped[k] = true }

// Key returns the key of message i.
func (p *Plan[K]) Key(i int) K { return p.keys[i] }
