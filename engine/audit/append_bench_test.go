package audit

import "testing"

// BenchmarkAppend times an append without fsync (bridge run), BenchmarkAppendSync
// with one (bridge serve).
func BenchmarkAppend(b *testing.B) {
	l, _ := Open(b.TempDir(), testKey, Options{})
	code := "print(1)"
	for i := 0; i < b.N; i++ {
		r := &Record{Kind: KindCall, Principal: "a", Session: "default", CodeSHA: Digest(code), Code: &code, Status: "success"}
		if err := l.Append(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendSync(b *testing.B) {
	l, _ := Open(b.TempDir(), testKey, Options{Sync: true})
	code := "print(1)"
	for i := 0; i < b.N; i++ {
		r := &Record{Kind: KindCall, Principal: "a", Session: "default", CodeSHA: Digest(code), Code: &code, Status: "success"}
		if err := l.Append(r); err != nil {
			b.Fatal(err)
		}
	}
}
