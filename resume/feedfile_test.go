package resume_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed32e55400/retries/resume"
)

// TestOpenFileFeedRefuses: failed files that are the input, a checkpoint
// of a pipe, and a checkpoint of another input are refused, each saying
// why.
func TestOpenFileFeedRefuses(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(input, []byte(`{"put":"id:a:a::1","fields":{}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(input)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, err := resume.OpenFileFeed(resume.FileFeedConfig{Input: in, Failed: input}); !errors.Is(err, resume.ErrFailedIsInput) || err.Error() != input+" is the input" {
		t.Errorf("failed files that are the input: %v, want ErrFailedIsInput after the path", err)
	}
	if _, err := resume.OpenFileFeed(resume.FileFeedConfig{Input: strings.NewReader(""), Checkpoint: filepath.Join(dir, "ck")}); err == nil || !strings.Contains(err.Error(), "cannot be resumed") {
		t.Errorf("a checkpoint of a reader that is not a file: %v", err)
	}
	ck := filepath.Join(dir, "ck")
	if err := resume.WriteEnvelope(ck, "feed", map[string]any{"version": 2, "size": 5, "array": false, "tail": map[string]any{}, "offset": 0, "line": 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := resume.OpenFileFeed(resume.FileFeedConfig{Input: in, Checkpoint: ck}); err == nil || !strings.Contains(err.Error(), "was made from another input") {
		t.Errorf("a checkpoint of another input: %v", err)
	}
}
