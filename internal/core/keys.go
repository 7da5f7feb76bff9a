package core

import "strings"

// Key naming.
//
// Every key and channel of one primitive is "<prefix>:{<name>}<suffix>". Redis Cluster hashes
// only the part between the first "{" and the first "}" after it, so all of them share one slot
// and every script stays single-slot. The name may hold any bytes, braces included: it is
// escaped so that it cannot contain "}" (which would end the hash tag early) and so that the
// escaping is one-to-one (two names never map to the same key). The prefix may not contain
// braces, since a "{" in it would become the hash tag instead.
//
// Escaping: "%" becomes "%25", "{" becomes "%7B", "}" becomes "%7D"; every other byte is kept.

var nameEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// BaseKey returns "<prefix>:{<escaped name>}", the key of the primitive's main structure and
// the stem of all its other keys. The name must not be empty.
func BaseKey(prefix, name string) (string, error) {
	if name == "" {
		return "", Invalid("empty name")
	}
	return prefix + ":{" + nameEscaper.Replace(name) + "}", nil
}

// ValidPrefix checks a key prefix.
func ValidPrefix(prefix string) error {
	if prefix == "" {
		return Invalid("empty key prefix")
	}
	if strings.ContainsAny(prefix, "{}") {
		return Invalid("key prefix %q contains a brace", prefix)
	}
	return nil
}
