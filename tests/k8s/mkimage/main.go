// mkimage writes a single-platform OCI image archive (the format that
// `ctr images import` reads) from uncompressed layer tarballs and/or single
// host files, so that images reach containerd without any registry.
//
//	mkimage -name localhost/pause:k8s -file bin/pause:/pause -entrypoint /pause -o pause.tar
//	mkimage -name localhost/pysbx:1 -layer rootfs.tar -env PATH=/usr/bin:/bin -o py.tar
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

type blob struct {
	digest string // sha256:hex
	size   int64
	path   string // file to copy from, or "" when data is set
	data   []byte
}

func main() {
	var layers, files, envs multi
	name := flag.String("name", "", "full image name, e.g. localhost/pause:k8s")
	out := flag.String("o", "", "output archive path")
	entry := flag.String("entrypoint", "", "entrypoint, space separated")
	cmd := flag.String("cmd", "", "cmd, space separated")
	user := flag.String("user", "", "image user, e.g. 65534:65534")
	flag.Var(&layers, "layer", "uncompressed layer tarball (repeatable, bottom first)")
	flag.Var(&files, "file", "host:dest[:mode] file put into one extra layer (repeatable)")
	flag.Var(&envs, "env", "KEY=VALUE (repeatable)")
	flag.Parse()
	if *name == "" || *out == "" || (len(layers) == 0 && len(files) == 0) {
		flag.Usage()
		os.Exit(2)
	}

	var layerBlobs []blob
	for _, l := range layers {
		d, n, err := hashFile(l)
		if err != nil {
			log.Fatal(err)
		}
		layerBlobs = append(layerBlobs, blob{digest: d, size: n, path: l})
	}
	if len(files) > 0 {
		data, err := filesLayer(files)
		if err != nil {
			log.Fatal(err)
		}
		layerBlobs = append(layerBlobs, memBlob(data))
	}

	diffIDs := make([]string, len(layerBlobs))
	for i, b := range layerBlobs {
		diffIDs[i] = b.digest // uncompressed: diff_id == digest
	}
	cfg := map[string]any{
		"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Env":        []string(envs),
			"Entrypoint": fields(*entry),
			"Cmd":        fields(*cmd),
			"User":       *user,
			"WorkingDir": "/",
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	}
	cfgBlob := memBlob(mustJSON(cfg))

	var ldesc []map[string]any
	for _, b := range layerBlobs {
		ldesc = append(ldesc, map[string]any{
			"mediaType": "application/vnd.oci.image.layer.v1.tar",
			"digest":    b.digest, "size": b.size,
		})
	}
	manifest := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{
			"mediaType": "application/vnd.oci.image.config.v1+json",
			"digest":    cfgBlob.digest, "size": cfgBlob.size,
		},
		"layers": ldesc,
	}
	manBlob := memBlob(mustJSON(manifest))
	tag := *name
	if i := strings.LastIndex(tag, ":"); i > strings.LastIndex(tag, "/") {
		tag = tag[i+1:]
	} else {
		tag = "latest"
	}
	index := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{
			"mediaType": "application/vnd.oci.image.manifest.v1+json",
			"digest":    manBlob.digest, "size": manBlob.size,
			"platform": map[string]string{"architecture": "amd64", "os": "linux"},
			"annotations": map[string]string{
				"io.containerd.image.name":          *name,
				"org.opencontainers.image.ref.name": tag,
			},
		}},
	}

	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	tw := tar.NewWriter(f)
	put := func(p string, b blob) {
		hdr := &tar.Header{Name: p, Mode: 0o644, Size: b.size, Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			log.Fatal(err)
		}
		if b.path == "" {
			_, err = tw.Write(b.data)
		} else {
			var src *os.File
			if src, err = os.Open(b.path); err == nil {
				_, err = io.Copy(tw, src)
				src.Close()
			}
		}
		if err != nil {
			log.Fatal(err)
		}
	}
	put("oci-layout", memBlob([]byte(`{"imageLayoutVersion":"1.0.0"}`)))
	put("index.json", memBlob(mustJSON(index)))
	seen := map[string]bool{}
	for _, b := range append([]blob{cfgBlob, manBlob}, layerBlobs...) {
		if seen[b.digest] {
			continue
		}
		seen[b.digest] = true
		put("blobs/sha256/"+strings.TrimPrefix(b.digest, "sha256:"), b)
	}
	if err := tw.Close(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s\n", *name, manBlob.digest)
}

func fields(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Fields(s)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		log.Fatal(err)
	}
	return b
}

func memBlob(b []byte) blob {
	s := sha256.Sum256(b)
	return blob{digest: "sha256:" + hex.EncodeToString(s[:]), size: int64(len(b)), data: b}
}

func hashFile(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), n, err
}

// filesLayer builds an uncompressed tar layer holding the given host files.
func filesLayer(specs []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, s := range specs {
		parts := strings.Split(s, ":")
		if len(parts) < 2 {
			return nil, fmt.Errorf("bad -file %q", s)
		}
		mode := int64(0o755)
		if len(parts) > 2 {
			fmt.Sscanf(parts[2], "%o", &mode)
		}
		data, err := os.ReadFile(parts[0])
		if err != nil {
			return nil, err
		}
		dest := strings.TrimPrefix(parts[1], "/")
		// parent directories
		for i := 0; i < len(dest); i++ {
			if dest[i] == '/' && !dirs[dest[:i]] {
				dirs[dest[:i]] = true
				if err := tw.WriteHeader(&tar.Header{Name: dest[:i] + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}); err != nil {
					return nil, err
				}
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: dest, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
