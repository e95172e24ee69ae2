// gotmpl_render: the reference for dlm's Go-template renderer. Renders an
// Ollama TEMPLATE with Go's own text/template the way the Ollama server
// feeds it a chat request, written here from that behaviour
// (formats.md §5.3; server/routes.go, template/template.go):
//   - the Modelfile SYSTEM becomes a leading system message when the
//     request's first message is not a system message;
//   - consecutive messages of one role are merged, joined by "\n\n";
//   - .System is every system message's content joined by "\n\n";
//   - .Messages the merged list (fields Role, Content), .Response "".
//
// usage: go run gotmpl_render.go TEMPLATE CONVS.json
// CONVS.json: [{"system": "..."|null, "messages": [{"role", "content"}]}]
// Prints a JSON array with one rendering per conversation ("ERROR" when
// the template fails).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/template"
)

type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type Conv struct {
	System   *string   `json:"system"`
	Messages []Message `json:"messages"`
}

func collate(msgs []Message) (string, []*Message) {
	var system []string
	var out []*Message
	for i := range msgs {
		m := msgs[i]
		if m.Role == "system" {
			system = append(system, m.Content)
		}
		if len(out) > 0 && out[len(out)-1].Role == m.Role && m.Role != "tool" {
			out[len(out)-1].Content += "\n\n" + m.Content
		} else {
			out = append(out, &m)
		}
	}
	return strings.Join(system, "\n\n"), out
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gotmpl_render TEMPLATE CONVS.json")
		os.Exit(2)
	}
	text, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	raw, err := os.ReadFile(os.Args[2])
	if err != nil {
		panic(err)
	}
	var convs []Conv
	if err := json.Unmarshal(raw, &convs); err != nil {
		panic(err)
	}
	out := []string{}
	for _, c := range convs {
		msgs := append([]Message{}, c.Messages...)
		if c.System != nil && *c.System != "" && (len(msgs) == 0 || msgs[0].Role != "system") {
			msgs = append([]Message{{Role: "system", Content: *c.System}}, msgs...)
		}
		system, collated := collate(msgs)
		t, err := template.New("").Parse(string(text))
		var b strings.Builder
		if err == nil {
			err = t.Execute(&b, map[string]any{"System": system, "Messages": collated, "Prompt": "", "Response": ""})
		}
		if err != nil {
			out = append(out, "ERROR")
		} else {
			out = append(out, b.String())
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		panic(err)
	}
}
