package scripts

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
)

// frag is a fragment for the preprocessor's tests: a definition, a block, and a block that
// inlines the other one.
const frag = `-- _frag: a test fragment.

-- twice doubles x.
local function twice(x)
  return 2 * x
end

-- head returns the first of list at or above min, and its place.
--@block head(list, min) -> v, at
for i, x in ipairs(list) do
  if x >= min then
    v, at = x, i
    break
  end
end
--@end

-- head2 is head for twice min.
--@block head2(list, min) -> v
local doubled = min + min
--@inline v = head(list, doubled)
--@end
`

func testFS(script string, more ...string) fstest.MapFS {
	fsys := fstest.MapFS{
		"_frag.lua":  {Data: []byte(frag)},
		"script.lua": {Data: []byte(script)},
	}
	for i := 0; i+1 < len(more); i += 2 {
		fsys[more[i]] = &fstest.MapFile{Data: []byte(more[i+1])}
	}
	return fsys
}

// An inlined block binds the arguments that are not the parameters' own names, declares the
// outputs not assigned to a target of their own name, and makes no definition.
func TestInlineExpandsABlockInPlace(t *testing.T) {
	got := expand(testFS(`local list = {3, 5}
if true then
  --@inline local first, at = head(list, tonumber(ARGV[1]))
  return {first, at}
end
--@include _frag
`), "script")
	assert.Equal(t, `local list = {3, 5}
if true then
  local first, at
  do
    local min = tonumber(ARGV[1])
    local v
    for i, x in ipairs(list) do
      if x >= min then
        v, at = x, i
        break
      end
    end
    first = v
  end
  return {first, at}
end
`, got)
}

// A block inlined in a block is expanded too; outputs of the block's own name are assigned
// straight, and a call of a block defines its function, written from the same text.
func TestInlineNestsAndABlockIsAFunction(t *testing.T) {
	got := expand(testFS(`--@include _frag
local v
--@inline v = head2(KEYS, 2)
return {v, head({1}, 1), twice(2)}
`), "script")
	assert.Equal(t, `-- twice doubles x.
local function twice(x)
  return 2 * x
end
-- head returns the first of list at or above min, and its place.
local function head(list, min)
  local v, at
  for i, x in ipairs(list) do
    if x >= min then
      v, at = x, i
      break
    end
  end
  return v, at
end
local v
do
  local list, min = KEYS, 2
  local doubled = min + min
  do
    local min = doubled
    local at
    for i, x in ipairs(list) do
      if x >= min then
        v, at = x, i
        break
      end
    end
  end
end
return {v, head({1}, 1), twice(2)}
`, got)
}

// Wrong text is refused when the scripts load, with a message that names the mistake.
func TestPreprocessorRefusesWrongText(t *testing.T) {
	block := func(body string) string {
		return "--@block b(x) -> y\n" + body + "--@end\n"
	}
	for _, c := range []struct {
		name, script, fragment, panics string
	}{
		{"unknown block", "--@include _f\n--@inline y = nope(1)\n", "", "no included fragment defines"},
		{"too few arguments", "--@include _f\n--@inline local y = b()\n", block("y = x\n"), "takes 1 arguments (x), given 0"},
		{"too many arguments", "--@include _f\n--@inline local y = b(1, 2)\n", block("y = x\n"), "takes 1 arguments (x), given 2"},
		{"too many targets", "--@include _f\n--@inline local y, z = b(1)\n", block("y = x\n"), "has 1 outputs, assigned to 2"},
		{"return", "--@include _f\n", block("if x then\n  return 1\nend\n"), "a return would leave"},
		{"top-level break", "--@include _f\n", block("if x then\n  break\nend\n"), "a break would leave"},
		{"assigned parameter", "--@include _f\n", block("x = 2\ny = x\n"), "assigns its parameter x"},
		{"no end", "--@include _f\n", "--@block b(x) -> y\ny = x\n", "has no --@end"},
		{"bad inline line", "--@include _f\n--@inline y = b(1) -- why\n", block("y = x\n"), "not an inline line"},
		{"definition before the include", "--@inline local y = b(1)\n--@include _f\n",
			"local function g()\nend\n\n" + block("y = g(x)\n"), "uses g, which is defined only at the include line"},
		{"target hidden by a local", "--@include _f\n--@inline local t = b(1)\n", block("local t = x\ny = t\n"), "target t of block b is a name the block declares"},
		{"target hidden by a parameter", "--@include _f\nlocal x\n--@inline x = b(1)\n", block("y = x\n"), "target x of block b is a name"},
		{"argument declared anew", "--@include _f\n--@inline local y = b(y)\n", block("y = x\n"), "reads y, which the inline line declares anew"},
		{"itself", "--@include _f\n", "--@block b(x) -> y\n--@inline y = b(x)\n--@end\n", "inlines itself"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fsys := fstest.MapFS{"_f.lua": {Data: []byte(c.fragment)}, "script.lua": {Data: []byte(c.script)}}
			defer func() {
				r := recover()
				s, _ := r.(string)
				assert.Contains(t, s, c.panics)
			}()
			expand(fsys, "script")
			t.Error("no panic")
		})
	}
}

// A return or a break inside a loop, or inside a function, that the block opens itself is
// allowed.
func TestBlocksMayBreakTheirOwnLoops(t *testing.T) {
	src := `--@block b(x) -> y
while true do
  if x then
    break
  end
end
repeat
  break
until true
for i = 1, 2 do
  y = function() return i end
end
--@end
`
	assert.NotPanics(t, func() {
		expand(fstest.MapFS{"_f.lua": {Data: []byte(src)}, "script.lua": {Data: []byte("--@include _f\n--@inline local y = b(1)\n")}}, "script")
	})
}
