def split_line(line):
    """Fields of one CSV line."""
    return line.split(",")
