package main

// ask.go answers elicitations for bridge exec on its terminal: the form's
// message and fields are shown on /dev/tty and read back from it, omitted
// fields taking the schema's defaults. Without a terminal every question
// is declined, so an unattended exec never approves anything.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bridge-mcp/bridge/engine"
	"github.com/bridge-mcp/bridge/protocol/printable"
)

// ttyHuman asks on a terminal. open returns the terminal; an error means
// there is none (every question is declined).
type ttyHuman struct {
	open func() (io.ReadWriteCloser, error)
	mu   sync.Mutex // one question at a time on the terminal
}

func newTTYHuman() *ttyHuman {
	return &ttyHuman{open: func() (io.ReadWriteCloser, error) { return os.OpenFile("/dev/tty", os.O_RDWR, 0) }}
}

func (h *ttyHuman) Caps() engine.HumanCaps {
	tty, err := h.open()
	if err != nil {
		return engine.HumanCaps{Missing: "bridge exec has no terminal (/dev/tty) to ask on"}
	}
	_ = tty.Close()
	return engine.HumanCaps{Form: true}
}

func (h *ttyHuman) Sample(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return nil, errors.New("bridge exec does not answer sampling requests")
}

var decline = &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}

// Elicit asks on the terminal. The read runs beside the wait so ctx (the
// approval timeout, the call's end) still bounds it; closing the terminal
// ends the read.
func (h *ttyHuman) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	if req.Params.Mode != "" && req.Params.Mode != mcp.ElicitationModeForm {
		return decline, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	tty, err := h.open()
	if err != nil {
		return decline, nil
	}
	type reply struct {
		res *mcp.ElicitationResult
		err error
	}
	done := make(chan reply, 1)
	go func() {
		res, err := askForm(tty, tty, req.Params)
		done <- reply{res, err}
	}()
	select {
	case r := <-done:
		_ = tty.Close()
		return r.res, r.err
	case <-ctx.Done():
		_ = tty.Close()
		<-done
		return nil, ctx.Err()
	}
}

// formField is one property of a flat form schema.
type formField struct {
	name, typ, title, desc string
	enum                   []string
	def                    any
	required               bool
}

func formFields(schema any) []formField {
	m, _ := schema.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	req := map[string]bool{}
	if rs, ok := m["required"].([]any); ok {
		for _, r := range rs {
			if s, ok := r.(string); ok {
				req[s] = true
			}
		}
	}
	if rs, ok := m["required"].([]string); ok {
		for _, s := range rs {
			req[s] = true
		}
	}
	var out []formField
	for name, p := range props {
		pm, _ := p.(map[string]any)
		f := formField{name: name, required: req[name], def: pm["default"]}
		f.typ, _ = pm["type"].(string)
		f.title, _ = pm["title"].(string)
		f.desc, _ = pm["description"].(string)
		switch e := pm["enum"].(type) {
		case []string:
			f.enum = e
		case []any:
			for _, v := range e {
				f.enum = append(f.enum, fmt.Sprint(v))
			}
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].required != out[j].required {
			return out[i].required
		}
		return out[i].name < out[j].name
	})
	return out
}

// askForm shows the form on w and reads one answer per field from r. An
// empty line takes the field's default; a required field without one, an
// invalid value, or the end of input declines the form.
func askForm(r io.Reader, w io.Writer, p mcp.ElicitationParams) (*mcp.ElicitationResult, error) {
	in := bufio.NewReader(io.LimitReader(r, 64<<10))
	fmt.Fprintf(w, "\n%s\n", printable.String(p.Message))
	content := map[string]any{}
	for _, f := range formFields(p.RequestedSchema) {
		label := f.name
		if f.title != "" {
			label = f.title
		}
		hint := f.typ
		if len(f.enum) > 0 {
			hint = strings.Join(f.enum, "/")
		}
		if f.def != nil {
			hint += fmt.Sprintf(", default %v", f.def)
		}
		fmt.Fprintf(w, "%s (%s): ", printable.String(label), printable.String(hint))
		line, err := in.ReadString('\n')
		line = strings.TrimSpace(line)
		if err != nil && line == "" {
			fmt.Fprintln(w, "\n(no answer: declined)")
			return decline, nil
		}
		if line == "" {
			if f.def != nil {
				content[f.name] = f.def
				continue
			}
			if f.required {
				fmt.Fprintln(w, "(required field left empty: declined)")
				return decline, nil
			}
			continue
		}
		v, ok := parseField(f, line)
		if !ok {
			fmt.Fprintf(w, "(%q is not a valid %s: declined)\n", printable.String(line), hint)
			return decline, nil
		}
		content[f.name] = v
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: content}}, nil
}

func parseField(f formField, s string) (any, bool) {
	if len(f.enum) > 0 {
		for _, e := range f.enum {
			if e == s {
				return s, true
			}
		}
		return nil, false
	}
	switch f.typ {
	case "boolean":
		b, err := strconv.ParseBool(s)
		return b, err == nil
	case "integer":
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	case "number":
		n, err := strconv.ParseFloat(s, 64)
		return n, err == nil
	}
	return s, true
}
