package image

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// VerifyScript runs in a built image (IMG-4, and `bridge doctor`): it imports the libraries, requires Python 3.11+,
// and prints the versions as one JSON object.
const VerifyScript = `import json, sys
import numpy, pandas, sklearn, matplotlib, scipy, PIL
if sys.version_info < (3, 11):
    sys.exit("python %s is too old; 3.11+ is required" % sys.version.split()[0])
print(json.dumps({"python": sys.version.split()[0], "numpy": numpy.__version__, "pandas": pandas.__version__,
                  "sklearn": sklearn.__version__, "matplotlib": matplotlib.__version__, "scipy": scipy.__version__,
                  "pillow": PIL.__version__}))
`

// VersionKeys orders the report lines.
var VersionKeys = []string{"python", "numpy", "pandas", "sklearn", "matplotlib", "scipy", "pillow"}

// verify runs the image with VerifyArgs and VerifyScript, reads its size, and writes the report to Stdout.
func (b *builder) verify(ctx context.Context, method string, elapsed time.Duration) error {
	return b.checkImage(ctx, b.opts.Tag, method, elapsed, VersionKeys, func() (map[string]string, error) {
		out, err := b.cli(ctx, verifyArgv(b.opts.VerifyArgs, b.opts.Tag)...)
		if err != nil {
			return nil, err
		}
		return ParseVersions(out)
	})
}

// checkImage is the end of every build: the "verify image" step runs check
// for the versions, the "inspect image" step reads the image's size, and the
// report names ref, method, elapsed and the versions of keys, in that order.
func (b *builder) checkImage(ctx context.Context, ref, method string, elapsed time.Duration, keys []string, check func() (map[string]string, error)) error {
	var versions map[string]string
	err := b.step("verify image", func() error {
		var err error
		versions, err = check()
		return err
	})
	if err != nil {
		return err
	}
	var size int64
	err = b.step("inspect image", func() error {
		size, err = b.imageSize(ctx)
		return err
	})
	if err != nil {
		return err
	}
	writeReport(b.opts.Stdout, ref, method, elapsed, keys, versions, size)
	return nil
}

// verifyArgv is the argv (after CLI and GlobalArgs) of the final check: verifyArgs(tag) then python3 -c VerifyScript.
func verifyArgv(verifyArgs func(string) []string, tag string) []string {
	return append(append([]string{}, verifyArgs(tag)...), "python3", "-c", VerifyScript)
}

// ParseVersions reads the JSON line printed by VerifyScript (the last non-blank line of out).
func ParseVersions(out []byte) (map[string]string, error) {
	lines := lastLines(string(out), 1)
	if len(lines) == 0 {
		return nil, fmt.Errorf("versions: check printed nothing")
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(lines[0]), &v); err != nil {
		return nil, fmt.Errorf("versions: %w", err)
	}
	for _, k := range VersionKeys {
		if v[k] == "" {
			return nil, fmt.Errorf("versions: %s missing in %q", k, lines[0])
		}
	}
	return v, nil
}

// imageSize returns the size of the image Tag in bytes.
func (b *builder) imageSize(ctx context.Context) (int64, error) {
	out, err := b.cli(ctx, "image", "inspect", "--format", "{{.Size}}", b.opts.Tag)
	if err != nil {
		return 0, err
	}
	size, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size: %w", err)
	}
	return size, nil
}

// writeReport writes the final report of a build: the reference, the method and time, one line per version of keys,
// in that order, and the image size.
func writeReport(w io.Writer, tag, method string, elapsed time.Duration, keys []string, versions map[string]string, size int64) {
	fmt.Fprintf(w, "built %s with the %s method in %s\n", tag, method, elapsed.Round(time.Second))
	for _, k := range keys {
		fmt.Fprintf(w, "  %-11s %s\n", k, versions[k])
	}
	fmt.Fprintf(w, "  %-11s %.1f MB (%d bytes)\n", "size", float64(size)/1e6, size)
}
