# mean N...: the arithmetic mean of the numbers ("mean 1 2" -> 1.5).
mean() {
    printf '%s\n' "$@" | awk '{ sum += $1 } END { print int(sum / NR) }'
}
