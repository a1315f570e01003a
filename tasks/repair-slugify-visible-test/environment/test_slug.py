from slug import slugify

assert slugify("Hello World") == "hello-world"
assert slugify("  Café au lait!  ") == "cafe-au-lait", slugify("  Café au lait!  ")
print("ok")
