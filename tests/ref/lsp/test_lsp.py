"""`dlm lsp` driven by a real client (pytest-lsp over stdio) as an editor
drives it: initialize, didOpen, diagnostics, completion, hover, code
actions, the original dlm-lsp's custom requests, shutdown/exit.

Diagnostics are checked against the positions `dlm show` prints for the
same file (the CLI is the spec: the server must say the same thing at the
same place), and against hand-computed LSP positions (0-based, UTF-16)."""
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile

import pytest
import pytest_lsp
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient

sys.path.insert(0, os.path.dirname(__file__))
from corpus import DOCS, EXPECT, ID  # noqa: E402

DLM = os.environ["DLM"]
HOME = tempfile.mkdtemp(prefix="dlm-lsp-home-")
WORK = tempfile.mkdtemp(prefix="dlm-lsp-docs-")
ENV = {**os.environ, "DLM_HOME": HOME}


def path_of(name):
    p = os.path.join(WORK, name + ".dlm")
    if not os.path.exists(p):
        with open(p, "w", encoding="utf-8") as f:
            f.write(DOCS[name])
    return p


def uri_of(name):
    return "file://" + path_of(name)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[DLM, "lsp"], server_env=ENV))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(T.InitializeParams(capabilities=T.ClientCapabilities()))
    yield
    await lsp_client.shutdown_session()


async def open_doc(client, name, text=None):
    uri = uri_of(name)
    client.text_document_did_open(T.DidOpenTextDocumentParams(
        text_document=T.TextDocumentItem(uri=uri, language_id="dlm", version=1,
                                         text=DOCS[name] if text is None else text)))
    await wait(client, "textDocument/publishDiagnostics")
    return uri, client.diagnostics[uri]


async def wait(client, method):
    """A notification, or a failure after 30 s (never a hung test)."""
    return await asyncio.wait_for(client.wait_for_notification(method), 30)


def cli_position(name):
    """line, col of `dlm show FILE`'s error (1-based), or None."""
    r = subprocess.run([DLM, "show", path_of(name)], capture_output=True, text=True, env=ENV)
    m = re.match(r"dlm: error: [^:]+:(\d+):(\d+): (.*)", r.stderr.splitlines()[0] if r.stderr else "")
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else None


@pytest.mark.parametrize("name", sorted(EXPECT))
async def test_diagnostics(client: LanguageClient, name):
    uri, diags = await open_doc(client, name)
    got = [(d.range.start.line, d.range.start.character, d.severity.value, d.message) for d in diags]
    want = EXPECT[name]
    assert len(got) == len(want), got
    for (l, c, sev, msg), (wl, wc, wsev, wmsg) in zip(got, want):
        assert (l, c, sev) == (wl, wc, wsev), got
        assert msg.startswith(wmsg), (msg, wmsg)
        assert all(d.source == "dlm" for d in diags)
    # the first error is the CLI's, at the CLI's line and column
    cli = cli_position(name)
    if cli and want and want[0][2] == 1:
        line, col, msg = cli
        assert got[0][0] == line - 1 and got[0][1] == col - 1, (got[0], cli)
        assert got[0][3].split("\n")[0] in msg


async def test_utf16_columns(client: LanguageClient):
    uri, diags = await open_doc(client, "utf16")
    line = DOCS["utf16"].split("\n")[3]
    prefix = line[:line.index("default_top_p")]
    # the CLI counts code points (col 44 here), LSP counts UTF-16 units
    assert cli_position("utf16")[:2] == (4, len(prefix) + 1)
    assert diags[0].range.start.line == 3
    assert diags[0].range.start.character == len(prefix.encode("utf-16-le")) // 2 == len(prefix) + 1
    assert diags[0].range.end.character - diags[0].range.start.character == len("default_top_p")


async def test_change_and_save(client: LanguageClient):
    uri, diags = await open_doc(client, "key")
    assert len(diags) == 1
    # incremental change: delete the line "foo: 1\n"
    client.text_document_did_change(T.DidChangeTextDocumentParams(
        text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[T.TextDocumentContentChangePartial(
            range=T.Range(start=T.Position(line=3, character=0), end=T.Position(line=4, character=0)), text="")]))
    await wait(client, "textDocument/publishDiagnostics")
    assert len(client.diagnostics[uri]) == 0
    # full change back to a broken text
    client.text_document_did_change(T.DidChangeTextDocumentParams(
        text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=3),
        content_changes=[T.TextDocumentContentChangeWholeDocument(text=DOCS["range"])]))
    await wait(client, "textDocument/publishDiagnostics")
    assert [d.range.start.line for d in client.diagnostics[uri]] == [4]
    client.text_document_did_save(T.DidSaveTextDocumentParams(
        text_document=T.TextDocumentIdentifier(uri=uri), text=DOCS["good"]))
    await wait(client, "textDocument/publishDiagnostics")
    assert len(client.diagnostics[uri]) == 0
    client.text_document_did_close(T.DidCloseTextDocumentParams(text_document=T.TextDocumentIdentifier(uri=uri)))
    await wait(client, "textDocument/publishDiagnostics")
    assert len(client.diagnostics[uri]) == 0


async def complete(client, uri, line, ch):
    r = await client.text_document_completion_async(T.CompletionParams(
        text_document=T.TextDocumentIdentifier(uri=uri), position=T.Position(line=line, character=ch)))
    return [] if r is None else (r.items if hasattr(r, "items") else r)


async def test_completion(client: LanguageClient):
    text = (H := "---\ndlm_id: " + ID + "\nbase_model: \ntraining:\n  adapter: \n  preference:\n    \n"
            "  sources:\n    - path: x\n      \n  adapters:\n    tone: {}\n\n---\n\n::instruction#\n")
    uri, _ = await open_doc(client, "good", text)
    labels = lambda items: [i.label for i in items]
    top = labels(await complete(client, uri, 12, 0))
    assert {"dlm_id", "base_model", "training", "export", "system_prompt", "dlm_version"} <= set(top)
    bases = await complete(client, uri, 2, 12)
    assert "smollm2-135m" in labels(bases) and "tiny" in labels(bases)
    sm = next(i for i in bases if i.label == "smollm2-135m")
    assert "Apache-2.0" in sm.detail and "GB" in sm.detail
    assert labels(await complete(client, uri, 4, 11)) == ["lora", "qlora", "dora"]
    pref = labels(await complete(client, uri, 6, 4))
    assert set(pref) == {"enabled", "method", "hyperparams", "loss_type", "reference"}
    src = labels(await complete(client, uri, 9, 6))
    assert set(src) == {"path", "include", "exclude", "max_bytes_per_file", "max_files"}
    body = labels(await complete(client, uri, 14, 0))
    assert body == ["::instruction::", "::preference::", "::image::", "::audio::"]
    assert labels(await complete(client, uri, 15, 14)) == ["tone"]
    # training keys include dlm's extensions, with the note
    tr = await complete(client, uri, 4, 2)
    assert {"lora_r", "sequence_len", "loss_on", "sources"} <= set(labels(tr))


async def test_completion_templates(client: LanguageClient):
    uri, _ = await open_doc(client, "good", "")
    items = await complete(client, uri, 0, 0)
    names = [i.label for i in items]
    listed = json.loads(subprocess.run([DLM, "templates", "list", "--json"], capture_output=True, text=True,
                                       env=ENV).stdout)["templates"]
    assert names == [t["name"] for t in listed]
    assert items[0].insert_text.startswith("---\ndlm_id: ")


async def hover(client, uri, line, ch):
    r = await client.text_document_hover_async(T.HoverParams(
        text_document=T.TextDocumentIdentifier(uri=uri), position=T.Position(line=line, character=ch)))
    return r.contents.value if r else None


async def test_hover(client: LanguageClient):
    uri, diags = await open_doc(client, "good")
    assert not diags
    h = await hover(client, uri, 2, 14)
    assert "smollm2-135m" in h and "Apache-2.0" in h and "LlamaForCausalLM" in h and "Fits this machine" in h
    k = await hover(client, uri, 5, 5)   # "tone: {}" is an adapter name: no key doc
    assert k is None
    t = await hover(client, uri, 3, 2)
    assert "Training configuration" in t
    # the section under the cursor: its id is the one `dlm show --json` computes
    show = json.loads(subprocess.run([DLM, "show", "--json", path_of("good")], capture_output=True, text=True,
                                     env=ENV).stdout)
    ids = [s["id"] for s in show["sections"]]
    sec = await hover(client, uri, 11, 2)
    assert ids[1] in sec and "adapter `tone`" in sec and "dlm train" in sec
    assert ids[0] in await hover(client, uri, 8, 0)
    assert await hover(client, uri, 7, 0) is None   # the closing fence


async def test_hover_key(client: LanguageClient):
    uri, _ = await open_doc(client, "range")
    h = await hover(client, uri, 4, 3)
    assert "LoRA rank" in h and "default: 8" in h and "1..256" in h


async def actions(client, uri, diags):
    return await client.text_document_code_action_async(T.CodeActionParams(
        text_document=T.TextDocumentIdentifier(uri=uri), range=T.Range(start=T.Position(line=0, character=0),
                                                                          end=T.Position(line=0, character=0)),
        context=T.CodeActionContext(diagnostics=list(diags))))


def apply(text, edits):
    lines = text.split("\n")
    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        s, t = e.range.start, e.range.end
        head = "\n".join(lines[:s.line] + [lines[s.line][:s.character]]) if s.line < len(lines) else text
        tail = "\n".join([lines[t.line][t.character:]] + lines[t.line + 1:]) if t.line < len(lines) else ""
        text = head + e.new_text + tail
        lines = text.split("\n")
    return text


def cli_ok(text):
    p = os.path.join(WORK, "fixed.dlm")
    with open(p, "w", encoding="utf-8") as f:
        f.write(text)
    return subprocess.run([DLM, "show", "--json", p], capture_output=True, text=True, env=ENV)


async def test_code_action_typo(client: LanguageClient):
    uri, diags = await open_doc(client, "typo")
    acts = await actions(client, uri, diags)
    fix = next(a for a in acts if a.title == "Replace 'lora_rr' with 'lora_r'")
    fixed = apply(DOCS["typo"], fix.edit.changes[uri])
    r = cli_ok(fixed)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["frontmatter"]["training"]["lora_r"] == 4


async def test_code_action_base(client: LanguageClient):
    uri, diags = await open_doc(client, "base")
    acts = await actions(client, uri, diags)
    fix = next(a for a in acts if a.title == "Change to 'smollm2-135m'")
    fixed = apply(DOCS["base"], fix.edit.changes[uri])
    assert "base_model: smollm2-135m\n" in fixed and cli_ok(fixed).returncode == 0


async def test_code_action_migrate(client: LanguageClient):
    uri, diags = await open_doc(client, "old")
    acts = await actions(client, uri, diags)
    fix = next(a for a in acts if a.title == "Migrate schema to v15")
    fixed = apply(DOCS["old"], fix.edit.changes[uri])
    # what `dlm migrate` itself writes
    p = os.path.join(WORK, "mig.dlm")
    with open(p, "w") as f:
        f.write(DOCS["old"])
    subprocess.run([DLM, "migrate", p], check=True, capture_output=True, env=ENV)
    assert fixed == open(p).read()


async def test_code_action_sources(client: LanguageClient):
    uri, diags = await open_doc(client, "range")
    acts = await actions(client, uri, [])
    add = next(a for a in acts if a.title == "Add a training.sources entry")
    fixed = apply(DOCS["range"], add.edit.changes[uri])
    assert "  sources:\n    - path: .\n      include: ['**/*']\n  lora_r: 0\n" in fixed


async def test_custom_requests(client: LanguageClient):
    bases = await client.protocol.send_request_async("dlm/listBaseModels", [])
    fields = {"key", "hf_id", "params", "size_gb_fp16", "context_length", "modality", "license_spdx",
              "requires_acceptance"}
    assert bases and all(set(todict(b)) == fields for b in bases)
    keys = [todict(b)["key"] for b in bases]
    assert "smollm2-135m" in keys and "tiny" in keys
    tmpl = [todict(t) for t in await client.protocol.send_request_async("dlm/listTemplates", [])]
    assert tmpl and all(set(t) == {"name", "title", "domain_tags", "recommended_base", "summary", "sample_prompts"}
                        for t in tmpl)
    uri, _ = await open_doc(client, "good")
    st = todict(await client.protocol.send_request_async("dlm/documentState", [uri]))
    assert st["dlm_id"] == ID and st["base_model"] == "smollm2-135m" and st["uri"] == uri
    assert todict(st["section_counts"]) == {"prose": 1, "instruction": 1}
    assert todict(st["base_model_spec"])["hf_id"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert {"store", "versions", "last_run"} <= set(st)
    # the original served them as workspace/executeCommand commands
    r = await client.workspace_execute_command_async(T.ExecuteCommandParams(command="dlm/documentState",
                                                                            arguments=[uri]))
    assert todict(r)["dlm_id"] == ID
    uri2, _ = await open_doc(client, "fence")
    st2 = todict(await client.protocol.send_request_async("dlm/documentState", [uri2]))
    assert st2["uri"] == uri2 and "unknown section fence" in st2["error"]


def todict(x):
    """pygls hands unknown results over as named tuples."""
    return x._asdict() if hasattr(x, "_asdict") else x


async def test_training_progress(client: LanguageClient):
    uri, _ = await open_doc(client, "good")
    store = os.path.join(HOME, "store", ID)
    os.makedirs(os.path.join(store, "run"), exist_ok=True)
    runner = subprocess.Popen(["sleep", "30"])
    try:
        hb = {"pid": runner.pid, "run_id": 3, "step": 7, "total": 40, "phase": "training", "loss": 1.25,
              "adapter_name": "tone"}
        with open(os.path.join(store, "run", "heartbeat.json.tmp"), "w") as f:
            json.dump(hb, f)
        os.rename(os.path.join(store, "run", "heartbeat.json.tmp"), os.path.join(store, "run", "heartbeat.json"))
        p = await wait(client, "dlm/trainingProgress")
        p = todict(p)
        assert (p["run_id"], p["step"], p["total_steps"], p["loss"], p["phase"], p["adapter_name"]) == \
            (3, 7, 40, 1.25, "training", "tone")
    finally:
        runner.kill()
        runner.wait()


async def test_commands_apply_edit(client: LanguageClient):
    """The original's dlm.setBaseModel / dlm.addSourceDirective commands (the
    VS Code side panel's buttons): the server asks the client to apply the
    edit with workspace/applyEdit."""
    edits = []

    @client.feature(T.WORKSPACE_APPLY_EDIT)
    def on_apply(params: T.ApplyWorkspaceEditParams):
        edits.append(params.edit)
        return T.ApplyWorkspaceEditResult(applied=True)

    uri, _ = await open_doc(client, "base")
    await client.workspace_execute_command_async(T.ExecuteCommandParams(
        command="dlm.setBaseModel", arguments=[uri, "qwen2.5-0.5b"]))
    await client.workspace_execute_command_async(T.ExecuteCommandParams(
        command="dlm.addSourceDirective", arguments=[uri, "docs"]))
    # the server sends each applyEdit before its command's answer, and the
    # client handles messages in order: both are in by now
    assert len(edits) == 2
    text = apply(DOCS["base"], edits[0].changes[uri])
    assert "base_model: qwen2.5-0.5b\n" in text and cli_ok(text).returncode == 0
    text = apply(text, edits[1].changes[uri])
    r = cli_ok(text)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["frontmatter"]["training"]["sources"][0]["path"] == "docs"
