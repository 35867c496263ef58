. ./src/slug.sh
. ./tests/assert.sh
check "$(slugify 'Hello, World!')" "hello-world" "slugify 'Hello, World!'"
check "$(slugify '  Shell & Rust  ')" "shell-rust" "slugify '  Shell & Rust  '"
check "$(slugify 'v2')" "v2" "slugify 'v2'"
report
