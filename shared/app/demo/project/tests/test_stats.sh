. ./src/stats.sh
. ./tests/assert.sh
check "$(mean 1 2)" "1.5" "mean 1 2"
check "$(mean 2 3 4)" "3" "mean 2 3 4"
check "$(mean 7)" "7" "mean 7"
report
