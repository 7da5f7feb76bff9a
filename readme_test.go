package aqs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestReadmeQuickStartIsTheExample checks that the body of main in the README's quick start is
// the body of Example, line for line (but for the Output comment), so that the code a reader
// copies is the code the tests run.
func TestReadmeQuickStartIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "```go\n")
	if !ok {
		t.Fatal("README.md has no Go code block")
	}
	block, _, _ = strings.Cut(block, "```")
	_, body, ok := strings.Cut(block, "func main() {\n")
	if !ok {
		t.Fatal("README.md's first Go code block has no func main")
	}
	body = strings.TrimSuffix(body, "}\n")

	want := exampleBody(t, "example_test.go", "Example")
	if body != want {
		t.Errorf("README.md's quick start differs from Example in example_test.go:\n--- README\n%s\n--- Example\n%s", body, want)
	}
}

// exampleBody returns the source lines of the body of the function name in file, without its
// Output comment.
func exampleBody(t *testing.T, file, name string) string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != name {
			continue
		}
		body := string(src[fset.Position(fn.Body.Lbrace).Offset+2 : fset.Position(fn.Body.Rbrace).Offset])
		var lines []string
		for _, l := range strings.SplitAfter(body, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "// Output:") {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "")
	}
	t.Fatalf("%s has no func %s", file, name)
	return ""
}
