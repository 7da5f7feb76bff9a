package lintest

import (
	"testing"

	"pgregory.net/rapid"
)

// InRapid returns a testing.TB through which a helper that needs one (such as
// redistest.AssertNoKeyWithoutTTL) can run inside a rapid property: its failures and logs go
// to rt, so that rapid sees the failure and shrinks the run, and a passing run logs nothing
// to t. The rest (Name, Cleanup, TempDir, ...) is t's.
func InRapid(t testing.TB, rt *rapid.T) testing.TB { return rapidTB{TB: t, rt: rt} }

type rapidTB struct {
	testing.TB
	rt *rapid.T
}

func (r rapidTB) Helper()                    { r.rt.Helper() }
func (r rapidTB) Log(args ...any)            { r.rt.Log(args...) }
func (r rapidTB) Logf(f string, args ...any) { r.rt.Logf(f, args...) }
func (r rapidTB) Error(args ...any)          { r.rt.Error(args...) }
func (r rapidTB) Errorf(f string, args ...any) {
	r.rt.Errorf(f, args...)
}
func (r rapidTB) Fatal(args ...any)            { r.rt.Fatal(args...) }
func (r rapidTB) Fatalf(f string, args ...any) { r.rt.Fatalf(f, args...) }
func (r rapidTB) Fail()                        { r.rt.Fail() }
func (r rapidTB) FailNow()                     { r.rt.FailNow() }
func (r rapidTB) Failed() bool                 { return r.rt.Failed() }
func (r rapidTB) Skip(args ...any)             { r.rt.Skip(args...) }
func (r rapidTB) Skipf(f string, args ...any)  { r.rt.Skipf(f, args...) }
func (r rapidTB) SkipNow()                     { r.rt.SkipNow() }
