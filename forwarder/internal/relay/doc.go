// Package relay is the core every piece of the forwarder is handed: the records and leases a
// source yields, the outcome of a delivery, the store that runs the relay's statements
// (internal/sqlstore) and fences them by lease epochs, the metrics, the retry policy, the
// share policy, and the in-flight tracking that keeps a relay from fencing itself. It imports
// no piece of the forwarder; the sources, the delivery modes and the acknowledger import it.
package relay
