#!/bin/sh
# Doxygen input filter: the public headers document every declaration with
# plain // comments (the contract, read in the header). This turns them into
# Doxygen comments for the API reference without changing the headers:
#   // text            above a declaration -> /// text
#   decl;  // text     after a member      -> decl;  ///< text
# The file's opening comment block (before #pragma once) becomes the file's
# own description; <word> placeholders in comments (key layouts) are escaped
# so they are not read as HTML tags; specialisations of std templates are
# left out (Doxygen can't place them).
exec sed -E \
  -e '1,/^#pragma once/{s#^// ?(.*)$#/// \1#;s#^/// dlock/([a-z_]+\.h) — #/// @file \1\n/// #}' \
  -e 's#^([[:space:]]*)//( |$)#\1///\2#' \
  -e 's#([;,{][[:space:]]*)//( |$)#\1///<\2#' \
  -e 's#^(struct std::.*)$#/// @cond\n\1\n/// @endcond#' \
  -e '/^[[:space:]]*\/\/\//s#<([A-Za-z_][A-Za-z0-9_.-]*)>#\\<\1\\>#g' \
  "$1"
