#!/usr/bin/env bash
# r1805: `dlm train --listen-rpc` against the original DocumentLanguageModel's
# own probe-injection server and cycle code (document-language-model 0.10.0,
# tests/ref/venv/orig.txt): the same request battery (tests/cli/helpers/
# probe_client.py) answered alike by dlm.train.rpc.ProbeRpcServer and by
# dlm, the same 1000-probe bound and 429, and the sections dlm's cycle
# trained equal to dlm.watch.loop._probes_to_sections of the same probes
# (section ids, harvest_source). Neither that package nor dlm-sway 0.1.0
# ships a client, so the client is the test's, checked here against the
# original's server. See tests/ref/orig/rpc_original.py.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
if ! V=$("$DLM_SRC/scripts/ref-venv.sh" orig); then
    [ "${DLM_REF_SKIP:-}" = 1 ] && exit 77
    echo "r1805: cannot make the orig venv (tests/ref/venv/orig.txt)" >&2; exit 1
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T"
export DLM_HOME="$T/h"
cat > d.dlm <<'DOC'
---
dlm_id: 01JD0000000000000000001805
dlm_version: 15
base_model: tiny
training:
  sequence_len: 64
  micro_batch_size: 2
  num_epochs: 1
---
Prose about nothing in particular.
DOC
"$V/bin/python" "$DLM_SRC/tests/ref/orig/rpc_original.py" "$DLM" d.dlm out
