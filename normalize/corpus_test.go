package normalize

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// corpusContract compiles the schema and synonyms of one folder of testdata/corpus.
func corpusContract(t testing.TB, dir string) *Contract {
	t.Helper()
	schema, err := os.ReadFile(filepath.Join(dir, "schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var synonyms map[string][]string
	if b, err := os.ReadFile(filepath.Join(dir, "synonyms.json")); err == nil {
		if err := json.Unmarshal(b, &synonyms); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Compile(filepath.Base(dir), schema, WithSynonyms(synonyms))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCorpus runs every recorded answer of testdata/corpus (realistic outputs of models, in
// Russian, Portuguese and English, for three schemas) through the pipeline, with the finish
// reason a case gives: each must get its expected outcome, the recovered result or the
// rejection at the right stage. A wrong accept fails the suite like any other miss.
func TestCorpus(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "corpus", "*"))
	if err != nil {
		t.Fatal(err)
	}
	schemas, total, rejects := 0, 0, 0
	langs := map[string]int{}
	stages := map[string]int{}
	finishes := map[string]int{}
	for _, dir := range dirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		schemas++
		c := corpusContract(t, dir)
		fixtures, err := LoadFixtures(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fixtures {
			total++
			langs[f.Lang]++
			finishes[f.Finish]++
			if f.Reject != "" {
				rejects++
				stages[f.Reject]++
			}
			if !f.CheckSteps {
				t.Errorf("%s/%s: the corpus pins the steps of every case", dir, f.Name)
			}
			t.Run(filepath.Base(dir)+"/"+f.Name, func(t *testing.T) {
				r := c.RunFixture(f)
				if !r.Pass {
					t.Fatalf("%s (%s): %s", f.Note, f.Lang, r.Problem)
				}
			})
		}
	}
	if schemas < 3 {
		t.Errorf("%d schemas in the corpus, want at least 3", schemas)
	}
	if total < 80 {
		t.Errorf("%d cases in the corpus, want at least 80", total)
	}
	for _, lang := range []string{"ru", "pt", "en"} {
		if langs[lang] < 15 {
			t.Errorf("%d cases in %s, want at least 15", langs[lang], lang)
		}
	}
	for _, stage := range []string{StageExtract, StageRepair, StageTruncated, StageSchema} {
		if stages[stage] == 0 {
			t.Errorf("no case is rejected at %s", stage)
		}
	}
	for _, finish := range []string{"stop", "length"} {
		if finishes[finish] < 3 {
			t.Errorf("%d cases with finish %s, want at least 3", finishes[finish], finish)
		}
	}
	t.Logf("%d cases (%d rejections: %v), by language %v, by finish reason %v", total, rejects, stages, langs, finishes)
}
