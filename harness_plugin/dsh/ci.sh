#!/usr/bin/env bash
# The DSH plugin's checks, run by .ci/run from the repository root (works from any directory):
#   1. DSH rc.7 with node >= 22.19 and pnpm, through ../shared/tools/dsh-env.sh (cached);
#   2. the plugin's pinned dev dependencies (typescript, @types/node) with `npm ci`, in a cache
#      directory keyed by the lockfile, never inside the repository (the wheel build, ruff, mypy
#      and the architecture tests walk the tree);
#   3. `tsc --noEmit` over src/ and test/ with tsconfig.json's strict options, DSH's packages
#      checked from source alongside;
#   4. the unit and end-to-end tests under node's test runner, through DSH's tsx.
# The end-to-end tests need the repository's .venv with artmem installed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# The workplace's shared tools sit beside the repository (../shared); ARTMEM_SHARED overrides.
shared=${ARTMEM_SHARED:-$repo/../shared}
if [ ! -x "$shared/tools/dsh-env.sh" ]; then
  echo "harness_plugin/dsh/ci.sh: DSH's environment script is missing at $shared/tools/dsh-env.sh;" \
       "set ARTMEM_SHARED to the directory holding tools/dsh-env.sh and vendor/" >&2
  exit 1
fi
dsh_env=$("$shared/tools/dsh-env.sh")  # a failure stops here (set -e), not at a later variable
eval "$dsh_env"

cache=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/artmem-dsh-plugin
deps="$cache/deps-$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-16)"
mkdir -p "$cache"
exec 9>"$cache/.lock"; flock 9
if [ ! -f "$deps/.installed" ]; then
  rm -rf "$deps.tmp" && mkdir -p "$deps.tmp"
  cp "$here/package.json" "$here/package-lock.json" "$deps.tmp/"
  (cd "$deps.tmp" && npm ci --no-audit --no-fund --silent)
  rm -rf "$deps" && mv "$deps.tmp" "$deps" && touch "$deps/.installed"
fi
tsc="$deps/node_modules/.bin/tsc"

# DSH compiles its vendored framework (cordis, cosmokit, schemastery) under relaxed settings of
# its own, so those three become declarations first, with their settings; the plugin and DSH's
# own packages are then checked from source under the plugin's strict settings.
vendor="$deps/vendor-$(basename "$DSH_ROOT")"
if [ ! -f "$vendor/.built" ]; then
  rm -rf "$vendor" && mkdir -p "$vendor"
  cat > "$vendor/tsconfig.json" <<EOF
{"extends": "$DSH_ROOT/vendor/cordis/tsconfig.json", "references": [],
 "include": ["$DSH_ROOT/vendor/cordis/src", "$DSH_ROOT/vendor/cosmokit/src", "$DSH_ROOT/vendor/schemastery/src"],
 "compilerOptions": {"rootDir": "$DSH_ROOT/vendor", "outDir": "$vendor", "declaration": true,
   "emitDeclarationOnly": true, "composite": false, "incremental": false, "declarationMap": false,
   "sourceMap": false, "typeRoots": ["$deps/node_modules/@types"]}}
EOF
  "$tsc" -p "$vendor/tsconfig.json"
  for name in cordis cosmokit schemastery; do  # their own dependencies, for the declarations
    [ -d "$DSH_ROOT/vendor/$name/node_modules" ] && ln -sfn "$DSH_ROOT/vendor/$name/node_modules" "$vendor/$name/node_modules"
  done
  touch "$vendor/.built"
fi
echo "{\"extends\": \"$DSH_ROOT/tsconfig.base.json\", \"files\": []}" > "$deps/tsconfig.dsh.json"
"$tsc" --showConfig -p "$deps/tsconfig.dsh.json" | node -e '
    const [root, vendor, here, types] = process.argv.slice(1)
    const paths = JSON.parse(require("fs").readFileSync(0, "utf8")).compilerOptions.paths
    for (const [name, targets] of Object.entries(paths)) paths[name] = targets.map(t => `${root}/${t}`)
    for (const name of ["cordis", "cosmokit", "schemastery"]) paths[`@deepseek-ai/${name}`] = [`${vendor}/${name}/src`]
    const config = { extends: `${here}/tsconfig.json`, compilerOptions: { paths, typeRoots: [types] } }
    process.stdout.write(JSON.stringify(config, null, 1))
  ' "$DSH_ROOT" "$vendor" "$here" "$deps/node_modules/@types" > "$deps/tsconfig.check.json"
echo "+ tsc --noEmit (strict)"
"$tsc" --noEmit -p "$deps/tsconfig.check.json"

echo "+ node --test (unit, then end to end against DSH)"
cd "$here"
node --import "$DSH_ROOT/node_modules/tsx/dist/esm/index.mjs" --test --test-concurrency=1 \
  test/*.test.ts test/e2e/*.test.ts
