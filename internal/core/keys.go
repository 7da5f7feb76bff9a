package core

import "strings"

// Key naming.
//
// Every key and channel of one primitive is "<prefix>:{<tag>}...<suffix>". Redis Cluster hashes
// only the part between the first "{" and the first "}" after it, so all of them share one slot
// and every script stays single-slot. The name may hold any bytes, braces included: it is
// escaped so that it cannot contain "}" (which would end the hash tag early) and so that the
// escaping is one-to-one (two names never map to the same key). The prefix may not contain
// braces, since a "{" in it would become the hash tag instead.
//
// Escaping: "%" becomes "%25", "{" becomes "%7B", "}" becomes "%7D"; every other byte is kept.
//
// A name with a hash tag of its own, by Redis Cluster's rule (a "{" with a "}" after it and
// at least one byte between them, as in "{cart-17}:sku-1"), lives in the slot of that tag,
// as a key of that name would: "<prefix>:{<tag>}{<escaped name>}". Names that share a tag
// share a slot, which is what lets a script take several of them at once (package
// multilock). Any other name is its own tag: "<prefix>:{<escaped name>}". The two forms never
// meet: after the first "}" a tagged name's key goes on with "{", any other's with its suffix,
// and every suffix starts with ":".

var nameEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// BaseKey returns the key of the primitive's main structure and the stem of all its other
// keys (see above). The name must not be empty.
func BaseKey(prefix, name string) (string, error) {
	if name == "" {
		return "", Invalid("empty name")
	}
	if tag, ok := HashTag(name); ok {
		return prefix + ":{" + tag + "}{" + nameEscaper.Replace(name) + "}", nil
	}
	return prefix + ":{" + nameEscaper.Replace(name) + "}", nil
}

// HashTag returns the hash tag of s by Redis Cluster's rule: the bytes between the first "{"
// and the first "}" after it, when there is at least one.
func HashTag(s string) (string, bool) {
	if i := strings.IndexByte(s, '{'); i >= 0 {
		if j := strings.IndexByte(s[i+1:], '}'); j > 0 {
			return s[i+1 : i+1+j], true
		}
	}
	return "", false
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

// GlobEscape escapes the glob metacharacters of s for SCAN's MATCH, so that a prefix or a
// name matches only itself.
func GlobEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
