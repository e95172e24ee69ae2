#!/usr/bin/env bash
# The other half of t0901's template training checks.
TEMPLATE_HALF=1 exec bash "$(dirname "$0")/t0901-slow-templates.sh"
