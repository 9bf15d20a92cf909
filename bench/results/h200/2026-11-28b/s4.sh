#!/usr/bin/env bash
set -uo pipefail
rm -rf .dev; cp -r .devcache .dev
OUT=$OUT timeout 580 bash bench/kernel_variants.sh
