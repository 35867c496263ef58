# slugify TEXT: the words of TEXT in lower case, joined by single dashes
# ("Hello, World!" -> "hello-world").
slugify() {
    printf '%s\n' "$1" | tr -c 'A-Za-z0-9\n' '-'
}
