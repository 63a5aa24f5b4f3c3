"""One JUnit file from the shards' (`cudashell grade --shard I/N --junit grade-I.xml` on each CI machine): every
shard's `testsuite` elements under one `testsuites` root, in the order the files are named.
`python merge_junit.py OUT.xml SHARD.xml…`"""

import sys
from xml.etree import ElementTree

out, shards = sys.argv[1], sys.argv[2:]
merged = ElementTree.Element("testsuites", name="cudashell grade")
for shard in shards:
    merged.extend(ElementTree.parse(shard).getroot())
ElementTree.ElementTree(merged).write(out, encoding="utf-8", xml_declaration=True)
