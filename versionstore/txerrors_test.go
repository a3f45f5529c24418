package versionstore

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// No bbolt transaction's error is dropped anywhere in the module: a View
// whose error is thrown away turns "the index could not be read" into "no
// such entry". A call of View, Update or Batch given a func(*bolt.Tx)
// must not stand alone as a statement, be deferred or started, or be
// assigned to the blank identifier.
func TestNoTransactionErrorDropped(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found above the package: %v", err)
	}
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(p, ".go"):
			return nil
		}
		files++
		for _, pos := range droppedTxErrors(t, p) {
			rel, _ := filepath.Rel(root, pos.Filename)
			t.Errorf("%s:%d: the error of a bbolt transaction is dropped", rel, pos.Line)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("checked only %d Go files: the walk missed the module", files)
	}
}

// droppedTxErrors parses the file at p and returns where it drops the
// error of a transaction.
func droppedTxErrors(t *testing.T, p string) []token.Position {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", p, err)
	}
	var out []token.Position
	ast.Inspect(f, func(n ast.Node) bool {
		var call ast.Expr
		switch s := n.(type) {
		case *ast.ExprStmt:
			call = s.X
		case *ast.DeferStmt:
			call = s.Call
		case *ast.GoStmt:
			call = s.Call
		case *ast.AssignStmt:
			if len(s.Rhs) == 1 && allBlank(s.Lhs) {
				call = s.Rhs[0]
			}
		}
		if c, ok := call.(*ast.CallExpr); ok && isTxCall(c) {
			out = append(out, fset.Position(c.Pos()))
		}
		return true
	})
	return out
}

func allBlank(es []ast.Expr) bool {
	for _, e := range es {
		if id, ok := e.(*ast.Ident); !ok || id.Name != "_" {
			return false
		}
	}
	return true
}

// isTxCall reports whether c is x.View, x.Update or x.Batch called with a
// function of one *bolt.Tx (a literal, or a name: anything but a literal
// of another type counts).
func isTxCall(c *ast.CallExpr) bool {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	if !ok || len(c.Args) != 1 {
		return false
	}
	switch sel.Sel.Name {
	case "View", "Update", "Batch":
	default:
		return false
	}
	lit, ok := c.Args[0].(*ast.FuncLit)
	if !ok {
		return true
	}
	ps := lit.Type.Params.List
	if len(ps) != 1 {
		return false
	}
	star, ok := ps[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	tx, ok := star.X.(*ast.SelectorExpr)
	return ok && tx.Sel.Name == "Tx"
}
