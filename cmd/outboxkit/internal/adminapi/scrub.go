package adminapi

import (
	"regexp"
)

// Patterns of what a database or broker error may say about where and as whom it connects:
// none of it is the client's business (the relay's log keeps the error whole).
var (
	// scheme://user:password@ in a URL.
	clientURLUserinfo = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]*@`)
	// key=value settings of a connection (pgx's "user=... database=...", libpq's key words).
	clientKeyValue = regexp.MustCompile("(?i)\\b(user|username|password|passwd|pwd|host|hostaddr|port|database|dbname|sslkey|sslcert|sslrootcert|sslpassword|token|secret)=(\"[^\"]*\"|'[^']*'|[^\\s`,;)]+)")
	// [IPv6]:port, IPv4[:port], host.name:port, and a DNS lookup's host name.
	clientIPv6   = regexp.MustCompile(`\[[0-9A-Fa-f:.%a-z0-9]+\](:\d{1,5})?`)
	clientIPv4   = regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}(:\d{1,5})?\b`)
	clientHost   = regexp.MustCompile(`\b[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9-]+)*:\d{1,5}\b`)
	clientLookup = regexp.MustCompile(`\blookup \S+`)
	// pgx names the host it dialled after the address: "<addr> (db.internal)".
	clientDialled = regexp.MustCompile(`<addr> \([^)]*\)`)
)

// Scrubbed is what replaces a secret or an address in an error a client sees.
const Scrubbed = "xxxxx"

// ClientError is the text of a server-side error (a database's, a broker's) for the API's and
// the console's clients: URLs' credentials, connection settings (user=, host=, password=, ...),
// network addresses and looked-up host names are replaced, and so is every secret of the
// relay's configuration (Config.Scrub). The relay logs the error whole.
func (a *API) ClientError(err error) string {
	msg := err.Error()
	if a.cfg.Scrub != nil {
		msg = a.cfg.Scrub(msg)
	}
	msg = clientURLUserinfo.ReplaceAllString(msg, "${1}"+Scrubbed+"@")
	msg = clientKeyValue.ReplaceAllString(msg, "${1}="+Scrubbed)
	msg = clientIPv6.ReplaceAllString(msg, "<addr>")
	msg = clientIPv4.ReplaceAllString(msg, "<addr>")
	msg = clientHost.ReplaceAllString(msg, "<addr>")
	msg = clientLookup.ReplaceAllString(msg, "lookup <host>")
	msg = clientDialled.ReplaceAllString(msg, "<addr>")
	return msg + " (the relay's log has the details)"
}
