package scripts

import (
	"fmt"
	"io/fs"
	"regexp"
	"strings"
)

// The preprocessor: one source for every Lua path.
//
// Shared code is written once, in fragment files (_*.lua), and sent as part of each script that
// uses it. A fragment holds definitions (local functions and variables) and blocks. A script
// (or a fragment) names the fragments it uses with "--@include NAME" lines; the definitions it
// reaches are written at the first of them, and the others are left out, because each
// definition that is sent costs a closure on every run of the script.
//
// So a hot path (the arrival at a contended lock, its release) that must make no closure cannot
// call a function; it inlines blocks instead. A block is a run of statements with named inputs
// and outputs and no return:
//
//	-- live_head returns the live head of the queue ...
//	--@block live_head(q, d, now) -> m, deadline
//	...statements that read q, d and now and assign m and deadline...
//	--@end
//
// and "--@inline local m, deadline = live_head(q, d, now)" in a script, a definition or
// another block is replaced by
//
//	local m, deadline
//	do
//	  <each parameter whose argument is not its own name, bound: local now = server_now>
//	  <each output not assigned straight to its target, declared: local deadline>
//	  <the block's statements>
//	  <the renamed outputs assigned: m2 = m>
//	end
//
// (without "local", the targets are variables in scope already; without targets, the outputs
// are dropped). Nothing in the body is renamed, and its locals are just registers of the
// enclosing function: the inlined block costs what the statements cost, no call and no
// closure. Since an argument that is a parameter's own name is not bound again, a block never
// assigns its parameters. A block is also a function of the same name, written from its text
// (the outputs declared first and returned last) for the scripts that call it, so the
// function and every inlined copy run the same statements.
//
// Lua 5.1 allows 200 locals in one function, and a script is one function body: each inlined
// block's locals end with its do...end, so only the outputs stay.

// definition is one top-level statement of a fragment: a local function (a block's function,
// for a block) with the comment above it, or a local variable.
type definition struct {
	name, text string
	block      *block // the block that this function is written from, or nil
	code       string // text with its inline lines expanded
	kept       bool
}

// block is a fragment's "--@block" text.
type block struct {
	name, from   string // from: the fragment that defines it, for messages
	params, outs []string
	body         string
}

var (
	defStart   = regexp.MustCompile(`^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)`)
	blockStart = regexp.MustCompile(`^--@block ([A-Za-z_]\w*)\(([\w, ]*)\)(?: -> ([\w, ]+))?\s*$`)
	inlineLine = regexp.MustCompile(`^(\s*)--@inline\s+(local\s+)?(?:([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*=\s*)?([A-Za-z_]\w*)\((.*)\)\s*$`)
	identifier = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	topLocal   = regexp.MustCompile(`^local (?:function )?([\w, ]+?)\s*(?:=|\(|$)`)
)

// expand returns the text of the script NAME.lua of fsys: its "--@include" lines replaced, at
// the first of them, by the definitions of the included fragments that the script reaches, and
// every "--@inline" line, in the script and in those definitions, by its block. It panics when
// the text is wrong (see inline), or when a block inlined before the include line uses a
// definition, which is not made there yet.
func expand(fsys fs.FS, name string) string {
	body, defs := split(fsys, name)
	blocks := map[string]*block{}
	for _, d := range defs {
		if d.block != nil {
			blocks[d.name] = d.block
		}
	}
	for _, d := range defs {
		d.code = inline(d.text, blocks, d.name, nil)
	}
	names := map[string]bool{}
	for _, d := range defs {
		names[d.name] = true
	}
	var code strings.Builder
	included := false
	for _, line := range strings.SplitAfter(body, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--@include ") {
			included = true
		}
		text := inline(line, blocks, name, nil)
		if !included && text != line {
			for id := range referenced(text) {
				if names[id] {
					panic(fmt.Sprintf("scripts: %s.lua: %q uses %s, which is defined only at the include line below it", name, strings.TrimSpace(line), id))
				}
			}
		}
		code.WriteString(text)
	}
	used := referenced(code.String())
	var keep func(string)
	keep = func(ident string) {
		for _, d := range defs {
			if d.name == ident && !d.kept {
				d.kept = true
				for id := range referenced(d.code) {
					keep(id)
				}
			}
		}
	}
	for id := range used {
		keep(id)
	}
	var out strings.Builder
	written := false // the definitions go once, where the first include line is
	for _, line := range strings.SplitAfter(code.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--@include ") {
			if !written {
				for _, d := range defs {
					if d.kept {
						out.WriteString(d.code)
					}
				}
				written = true
			}
			continue
		}
		out.WriteString(line)
	}
	return out.String()
}

// split returns a file's own text and the definitions of the fragments it includes, in
// order (a fragment's own includes first).
func split(fsys fs.FS, name string) (body string, defs []*definition) {
	b, err := fs.ReadFile(fsys, name+".lua")
	if err != nil {
		panic("scripts: " + err.Error())
	}
	body = string(b)
	seen := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if inc, ok := strings.CutPrefix(strings.TrimSpace(line), "--@include "); ok {
			for _, d := range fragment(fsys, strings.TrimSpace(inc)) {
				if !seen[d.name] { // a fragment included by two others comes once
					seen[d.name] = true
					defs = append(defs, d)
				}
			}
		}
	}
	return body, defs
}

// fragment returns the definitions of a fragment file and of the fragments it includes.
func fragment(fsys fs.FS, name string) []*definition {
	body, defs := split(fsys, name)
	var comment strings.Builder
	var cur *definition
	var blk *definition // the block being read
	var blkBody strings.Builder
	for _, line := range strings.SplitAfter(body, "\n") {
		switch {
		case blk != nil:
			if strings.TrimSpace(line) != "--@end" {
				blkBody.WriteString(line)
				continue
			}
			blk.block.body = blkBody.String()
			checkBlock(blk.block)
			blk.text += blockFunction(blk.block)
			blk = nil
		case cur != nil:
			cur.text += line
			if strings.HasPrefix(line, "end") {
				cur = nil
			}
		case strings.HasPrefix(line, "--@block"):
			m := blockStart.FindStringSubmatch(strings.TrimRight(line, "\n"))
			if m == nil {
				panic(fmt.Sprintf("scripts: %s.lua: not a block header (--@block name(a, b) -> x, y): %q", name, line))
			}
			b := &block{name: m[1], from: name, params: names(m[2]), outs: names(m[3])}
			blk = &definition{name: b.name, text: comment.String(), block: b}
			blkBody.Reset()
			comment.Reset()
			defs = append(defs, blk)
		case strings.HasPrefix(line, "--@end"):
			panic(fmt.Sprintf("scripts: %s.lua: --@end without --@block", name))
		case strings.HasPrefix(line, "--"):
			comment.WriteString(line)
		case strings.TrimSpace(line) == "":
			comment.Reset() // a file header, not a definition's comment
		default:
			m := defStart.FindStringSubmatch(line)
			if m == nil {
				panic(fmt.Sprintf("scripts: %s.lua: not a local definition: %q", name, line))
			}
			d := &definition{name: m[1], text: comment.String() + line}
			comment.Reset()
			defs = append(defs, d)
			if strings.HasPrefix(line, "local function ") {
				cur = d
			}
		}
	}
	if blk != nil {
		panic(fmt.Sprintf("scripts: %s.lua: block %s has no --@end", name, blk.name))
	}
	return defs
}

// blockFunction returns the text of the function that a block also is.
func blockFunction(b *block) string {
	var s strings.Builder
	fmt.Fprintf(&s, "local function %s(%s)\n", b.name, strings.Join(b.params, ", "))
	if len(b.outs) > 0 {
		fmt.Fprintf(&s, "  local %s\n", strings.Join(b.outs, ", "))
	}
	s.WriteString(indent(b.body, "  "))
	if len(b.outs) > 0 {
		fmt.Fprintf(&s, "  return %s\n", strings.Join(b.outs, ", "))
	}
	s.WriteString("end\n")
	return s.String()
}

// checkBlock panics when a block's body could leave it other than by its end: a return, or a
// break outside the loops it opens itself (a function it defines may return); or when it
// assigns a parameter (which may be the caller's own variable, not bound again), or an output
// is a parameter too.
func checkBlock(b *block) {
	where := fmt.Sprintf("scripts: %s.lua: block %s", b.from, b.name)
	for _, o := range b.outs {
		for _, p := range b.params {
			if o == p {
				panic(fmt.Sprintf("%s: %s is both a parameter and an output", where, o))
			}
		}
	}
	var stack []string  // the open constructs: function, loop, other
	loopHeader := false // a while or for whose do is still to come
	for _, tok := range tokens(b.body) {
		switch tok {
		case "while", "for":
			stack = append(stack, "loop")
			loopHeader = true
		case "repeat":
			stack = append(stack, "loop")
		case "do":
			if loopHeader {
				loopHeader = false
			} else {
				stack = append(stack, "other")
			}
		case "if":
			stack = append(stack, "other")
		case "function":
			stack = append(stack, "function")
		case "end", "until":
			if len(stack) == 0 {
				panic(fmt.Sprintf("%s: unbalanced %q", where, tok))
			}
			stack = stack[:len(stack)-1]
		case "return", "break":
			inLoop, inFunction := false, false
			for _, s := range stack {
				if s == "function" {
					inFunction, inLoop = true, false
				} else if s == "loop" {
					inLoop = true
				}
			}
			if !inFunction && (tok == "return" || !inLoop) {
				panic(fmt.Sprintf("%s: a %s would leave the code the block is inlined in; a block ends at its end", where, tok))
			}
		}
	}
	for _, p := range b.params {
		assign := regexp.MustCompile(`^\s*(?:[A-Za-z_]\w*\s*,\s*)*` + p + `\s*(?:,\s*[A-Za-z_]\w*\s*)*=[^=]`)
		for _, line := range strings.Split(b.body, "\n") {
			if assign.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "local ") {
				panic(fmt.Sprintf("%s assigns its parameter %s: %q", where, p, strings.TrimSpace(line)))
			}
		}
	}
}

// tokens returns the words of Lua code (names and keywords), strings and comments left aside.
func tokens(code string) []string {
	var out []string
	for i := 0; i < len(code); {
		c := code[i]
		switch {
		case strings.HasPrefix(code[i:], "--"):
			j := strings.IndexByte(code[i:], '\n')
			if j < 0 {
				return out
			}
			i += j
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(code) && code[j] != c {
				if code[j] == '\\' {
					j++
				}
				j++
			}
			i = j + 1
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			j := i
			for j < len(code) && (code[j] == '_' || 'a' <= code[j] && code[j] <= 'z' || 'A' <= code[j] && code[j] <= 'Z' || '0' <= code[j] && code[j] <= '9') {
				j++
			}
			out = append(out, code[i:j])
			i = j
		default:
			i++
		}
	}
	return out
}

// inline returns text with each of its "--@inline" lines replaced by the block it names (see
// the top of this file), expanded in turn. in names the file or definition, for messages;
// open holds the blocks being expanded, which may not inline themselves.
func inline(text string, blocks map[string]*block, in string, open []string) string {
	if !strings.Contains(text, "--@inline") {
		return text
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--@inline") {
			out.WriteString(line)
			continue
		}
		c := parseInline(line, blocks, in, open)
		c.check()
		c.write(&out, blocks, open)
	}
	return out.String()
}

// inlineCall is one "--@inline [local] targets = name(args)" line of in.
type inlineCall struct {
	in, line, ind string
	local         bool
	targets, args []string
	b             *block
}

// parseInline reads an inline line, and panics on one that names no block of blocks or a block
// in open (the blocks being inlined around it).
func parseInline(line string, blocks map[string]*block, in string, open []string) inlineCall {
	m := inlineLine.FindStringSubmatch(strings.TrimRight(line, "\n"))
	if m == nil {
		panic(fmt.Sprintf("scripts: %s: not an inline line (--@inline [local] x, y = name(a, b)): %q", in, strings.TrimSpace(line)))
	}
	c := inlineCall{in: in, line: strings.TrimSpace(line), ind: m[1], local: m[2] != "", targets: names(m[3]),
		args: splitArgs(m[5]), b: blocks[m[4]]}
	if c.b == nil {
		panic(fmt.Sprintf("scripts: %s: --@inline of %s, which no included fragment defines as a block", in, m[4]))
	}
	for _, o := range open {
		if o == c.b.name {
			panic(fmt.Sprintf("scripts: %s: block %s inlines itself (%s)", in, c.b.name, strings.Join(append(open, c.b.name), " -> ")))
		}
	}
	return c
}

// check panics when the call's arguments or targets do not fit its block: the counts, a target
// that a name of the block's own would hide, a local line's argument that reads a target.
func (c inlineCall) check() {
	b := c.b
	if len(c.args) != len(b.params) {
		panic(fmt.Sprintf("scripts: %s: block %s takes %d arguments (%s), given %d: %q", c.in, b.name, len(b.params), strings.Join(b.params, ", "), len(c.args), c.line))
	}
	if len(c.targets) > len(b.outs) {
		panic(fmt.Sprintf("scripts: %s: block %s has %d outputs, assigned to %d: %q", c.in, b.name, len(b.outs), len(c.targets), c.line))
	}
	own := map[string]bool{} // the names a target may not be, as they would hide it
	for _, p := range b.params {
		own[p] = true
	}
	for _, l := range strings.Split(b.body, "\n") {
		if m := topLocal.FindStringSubmatch(l); m != nil {
			for _, n := range names(m[1]) {
				own[n] = true
			}
		}
	}
	for i, t := range c.targets {
		if own[t] && t != b.outs[i] {
			panic(fmt.Sprintf("scripts: %s: target %s of block %s is a name the block declares itself: %q", c.in, t, b.name, c.line))
		}
	}
	if !c.local {
		return
	}
	if len(c.targets) == 0 {
		panic(fmt.Sprintf("scripts: %s: --@inline local without targets: %q", c.in, c.line))
	}
	for _, a := range c.args {
		for _, t := range c.targets {
			if referenced(a)[t] {
				panic(fmt.Sprintf("scripts: %s: argument %s reads %s, which the inline line declares anew: %q", c.in, a, t, c.line))
			}
		}
	}
}

// write writes the call's expansion (see the top of this file) to out.
func (c inlineCall) write(out *strings.Builder, blocks map[string]*block, open []string) {
	b, ind := c.b, c.ind
	if c.local {
		fmt.Fprintf(out, "%slocal %s\n", ind, strings.Join(c.targets, ", "))
	}
	fmt.Fprintf(out, "%sdo\n", ind)
	var ps, as []string
	for i, p := range b.params {
		if c.args[i] != p {
			ps, as = append(ps, p), append(as, c.args[i])
		}
	}
	if len(ps) > 0 {
		fmt.Fprintf(out, "%s  local %s = %s\n", ind, strings.Join(ps, ", "), strings.Join(as, ", "))
	}
	var decl, from, to []string
	for i, o := range b.outs {
		if i >= len(c.targets) {
			decl = append(decl, o)
		} else if c.targets[i] != o {
			decl, from, to = append(decl, o), append(from, o), append(to, c.targets[i])
		}
	}
	if len(decl) > 0 {
		fmt.Fprintf(out, "%s  local %s\n", ind, strings.Join(decl, ", "))
	}
	out.WriteString(indent(inline(b.body, blocks, b.from+".lua: block "+b.name, append(open, b.name)), ind+"  "))
	if len(from) > 0 {
		fmt.Fprintf(out, "%s  %s = %s\n", ind, strings.Join(to, ", "), strings.Join(from, ", "))
	}
	fmt.Fprintf(out, "%send\n", ind)
}

// names splits a list of names "a, b".
func names(list string) []string {
	var out []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// splitArgs splits the argument list of a call at its top-level commas.
func splitArgs(list string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(list); i++ {
		switch c := list[i]; c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case '\'', '"':
			for i++; i < len(list) && list[i] != c; i++ {
				if list[i] == '\\' {
					i++
				}
			}
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(list[start:i]))
				start = i + 1
			}
		}
	}
	if last := strings.TrimSpace(list[start:]); last != "" || len(out) > 0 {
		out = append(out, last)
	}
	return out
}

// indent prefixes each non-empty line of text with ind.
func indent(text, ind string) string {
	var out strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if strings.TrimSpace(line) != "" {
			out.WriteString(ind)
		}
		out.WriteString(line)
	}
	return out.String()
}

// referenced returns the identifiers that Lua code uses, comments left aside.
func referenced(code string) map[string]bool {
	ids := map[string]bool{}
	for _, line := range strings.Split(code, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		for _, id := range identifier.FindAllString(line, -1) {
			ids[id] = true
		}
	}
	return ids
}
