package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bridge-mcp/bridge/protocol"
)

// toolHeader starts the first line of a saved tool file; the rest of that
// line is the tool's metadata as JSON, and the source follows.
const toolHeader = "# bridge saved tool: "

// checkToolName refuses what the sandbox would refuse to load by name alone
// (pynames.go); the source can only be checked by Python, in the sandbox.
func checkToolName(name string) error {
	if !nameRe.MatchString(name) {
		return invalid("Invalid tool name '%s': use a Python identifier of at most 64 characters", shown(name))
	}
	if why := reservedReason(name); why != "" {
		return invalid("Tool name '%s' is reserved by the sandbox (%s); rename the function", name, why)
	}
	return nil
}

func (s *Store) toolPath(name string) string { return filepath.Join(s.ToolsDir(), name+".py") }

// SaveTool writes a tool's source with its signature, docstring, hash and
// time to <state>/.bridge/tools/<name>.py (SAV-1).
func (s *Store) SaveTool(p protocol.SaveToolParams) (protocol.SavedTool, error) {
	if err := checkToolName(p.Name); err != nil {
		return protocol.SavedTool{}, err
	}
	if n := len(p.Source) + len(p.Doc) + len(p.Signature); n > MaxToolBytes {
		return protocol.SavedTool{}, invalid("Tool '%s' is %d bytes, over the %d-byte limit for a saved tool", p.Name, n, MaxToolBytes)
	}
	if strings.TrimSpace(p.Source) == "" {
		return protocol.SavedTool{}, invalid("Tool '%s' has no source", p.Name)
	}
	sum := sha256.Sum256([]byte(p.Source))
	t := protocol.SavedTool{Name: p.Name, Doc: p.Doc, Signature: p.Signature, SHA256: hex.EncodeToString(sum[:]), SavedAt: unixSeconds(s.now())}
	meta, err := json.Marshal(t)
	if err != nil {
		return protocol.SavedTool{}, diskError(err)
	}
	data := []byte(toolHeader + string(meta) + "\n" + p.Source)
	err = s.locked(s.ToolsDir(), func() error {
		if _, err := os.Stat(s.toolPath(p.Name)); isNotExist(err) {
			if n, err := s.toolCount(); err != nil {
				return diskError(err)
			} else if n >= MaxTools {
				return invalid("%d tools are saved, the limit; remove one with runtime.delete_tool(name)", n)
			}
		}
		if err := writeFile(s.toolPath(p.Name), data); err != nil {
			return diskError(err)
		}
		return nil
	})
	return t, err
}

func (s *Store) toolCount() (int, error) {
	names, err := s.toolNames()
	return len(names), err
}

// toolNames lists the saved tools' names, sorted.
func (s *Store) toolNames() ([]string, error) {
	des, err := os.ReadDir(s.ToolsDir())
	if isNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, de := range des {
		if name, ok := strings.CutSuffix(de.Name(), ".py"); ok && nameRe.MatchString(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// readTool parses one saved tool file.
func (s *Store) readTool(name string) (protocol.SavedTool, error) {
	data, err := readSmall(s.toolPath(name), MaxToolBytes+64<<10)
	if err != nil {
		return protocol.SavedTool{}, err
	}
	line, source, _ := bytes.Cut(data, []byte("\n"))
	meta, ok := bytes.CutPrefix(line, []byte(toolHeader))
	var t protocol.SavedTool
	if !ok || json.Unmarshal(meta, &t) != nil {
		return protocol.SavedTool{}, fmt.Errorf("its first line is not a bridge header; save it again with save_tool")
	}
	t.Name, t.Source = name, string(source)
	return t, nil
}

// SavedTools returns every saved tool with its source, sorted by name, and
// one problem line per file that cannot be read or has a reserved name.
func (s *Store) SavedTools() ([]protocol.SavedTool, []string, error) {
	tools := []protocol.SavedTool{}
	problems := []string{}
	err := s.locked(s.ToolsDir(), func() error {
		names, err := s.toolNames()
		if err != nil {
			return diskError(err)
		}
		for _, name := range names {
			if why := reservedReason(name); why != "" {
				// Saved before the name was reserved: never sent to a
				// sandbox; the file is kept for the user to delete.
				problems = append(problems, fmt.Sprintf("saved tool '%s' not loaded: its name is reserved by the sandbox (%s); runtime.delete_tool('%s')", name, why, name))
				continue
			}
			t, err := s.readTool(name)
			if err != nil {
				problems = append(problems, fmt.Sprintf("saved tool '%s' (%s) cannot be read: %v", name, s.toolPath(name), err))
				continue
			}
			tools = append(tools, t)
		}
		return nil
	})
	return tools, problems, err
}

// DeleteTool removes a saved tool and reports whether it existed.
func (s *Store) DeleteTool(name string) (bool, error) {
	if !nameRe.MatchString(name) {
		return false, invalid("Invalid tool name '%s': use a Python identifier of at most 64 characters", shown(name))
	}
	return s.removeLocked(s.ToolsDir(), s.toolPath(name))
}
