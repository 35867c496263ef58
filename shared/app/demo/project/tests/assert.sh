# check ACTUAL EXPECTED WHAT: one test; report: exit 1 if any check failed.
failed=0
check() {
    if [ "$1" = "$2" ]; then
        echo "ok   $3"
    else
        echo "FAIL $3: got '$1', want '$2'"
        failed=$((failed + 1))
    fi
}
report() {
    [ "$failed" -eq 0 ] || { echo "$failed failed"; exit 1; }
}
