package scripts_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/redaqs/aqs/internal/scripts"
)

// Every KEYS[n] and ARGV[n] a script reads is documented in its header, the comment at its
// top that its Go call sites are written against.
func TestScriptHeadersDocumentEveryKeyAndArgument(t *testing.T) {
	ref := regexp.MustCompile(`\b(KEYS|ARGV)\[(\d+)\]`)
	span := regexp.MustCompile(`\b(KEYS|ARGV)\[(\d+)\.\.(\d*)\]`)
	checked := 0
	for _, s := range scripts.All() {
		var header, code []string
		inHeader := true
		for _, line := range strings.Split(s.Source(), "\n") {
			trimmed := strings.TrimSpace(line)
			if inHeader && strings.HasPrefix(trimmed, "--") {
				header = append(header, trimmed)
				continue
			}
			inHeader = false
			if i := strings.Index(line, "--"); i >= 0 {
				line = line[:i] // a comment after code
			}
			code = append(code, line)
		}
		text := strings.Join(header, "\n")
		documented := func(kind string, n int) bool {
			for _, m := range ref.FindAllStringSubmatch(text, -1) {
				if m[1] == kind && atoi(m[2]) == n {
					return true
				}
			}
			// A range: ARGV[1..6], or ARGV[7..] for the rest.
			for _, m := range span.FindAllStringSubmatch(text, -1) {
				if m[1] == kind && atoi(m[2]) <= n && (m[3] == "" || n <= atoi(m[3])) {
					return true
				}
			}
			return false
		}
		for _, m := range ref.FindAllStringSubmatch(strings.Join(code, "\n"), -1) {
			assert.True(t, documented(m[1], atoi(m[2])), "%s reads %s, which its header does not document", s.Name(), m[0])
			checked++
		}
	}
	assert.Greater(t, checked, 100, "the scripts' reads of KEYS and ARGV were not found")
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
