# cmake -DINPUT=file -DOUTPUT=header -DNAME=symbol -P embed_text.cmake: writes a C header holding the
# file's bytes as `static const char NAME[]` and `static const size_t NAME_len` (the page of `vkasr serve`
# is served from the binary this way; no other build step touches it).
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," body "${hex}")
string(REGEX REPLACE "(('\\\\x[0-9a-f][0-9a-f]',){16})" "\\1\n" body "${body}")
file(WRITE "${OUTPUT}.tmp" "/* generated from ${INPUT} by cmake/embed_text.cmake */\nstatic const char ${NAME}[] = {\n${body}0};\nstatic const size_t ${NAME}_len = ${bytes};\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
