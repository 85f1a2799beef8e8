package config

import (
	"os"
	"testing"
)

// FuzzParse: no input makes Parse panic, and a File it accepts holds what Build relies on.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(examplePath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(minimal))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("providers: {p: {<<: [*x]}}\n"))
	f.Add([]byte("server: {listen: ${X}}\n"))
	f.Add([]byte("- 1\n- 2\n"))
	f.Add([]byte("providers:"))
	f.Add([]byte("--- |\n  text\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data, "/cfg", envOf(map[string]string{"X": "127.0.0.1:1"}))
		if err != nil {
			if _, ok := err.(Errors); !ok {
				t.Fatalf("error %T is not Errors", err)
			}
			return
		}
		if len(file.Providers) == 0 {
			t.Fatal("accepted a file without providers")
		}
		for _, tk := range file.Tasks {
			if tk.Criticality == 0 || len(tk.Cascade) == 0 {
				t.Fatalf("accepted task %+v", tk)
			}
		}
	})
}
