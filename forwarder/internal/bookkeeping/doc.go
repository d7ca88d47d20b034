// Package bookkeeping is what the relay records beside the events and the operator's Admin
// (forwarder/admin) reads back: the names of a row's states, the default names of a lease group,
// its transactional units and their checkpoint topic, the unit count a lease group runs with,
// the format of the checkpoints the units commit, and the cdc slots' drain state. The relay
// (package forwarder) and the Admin both import it, so that they read and name these alike;
// neither imports the other.
package bookkeeping
