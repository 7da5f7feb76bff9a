package scripts

import (
	"regexp"
	"sort"
	"strings"
)

// callRE finds the commands the scripts call by name: redis.call('HSET', ...).
var callRE = regexp.MustCompile(`redis\.p?call\(\s*'([A-Za-z]+)'`)

// Commands returns, upper-cased and sorted, every Redis command the scripts call by name. The
// publish command a script receives as an argument (PUBLISH, or SPUBLISH on Redis Cluster) is
// not among them. aqs.Verify checks that the server's ACL lets the user run each of them on
// the prefix's keys.
func Commands() []string {
	seen := map[string]bool{}
	for _, s := range all {
		for _, m := range callRE.FindAllStringSubmatch(s.src, -1) {
			seen[strings.ToUpper(m[1])] = true
		}
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}
